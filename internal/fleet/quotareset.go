package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// QuotaReset is a fleet-wide quota reset of one user, the value of its
// key (QuotaResetKey): every router forgets the user's usage counted
// before At in the current period, as `shaperctl quota reset` does on
// one router, and each applies a reset once (a router that was away
// applies it when it reads the key again).
type QuotaReset struct {
	At time.Time `json:"at"`
	By string    `json:"by,omitempty"`
}

// ResetQuota writes user's fleet-wide quota reset r and, in the same
// transaction, deletes every router's usage key of user, so that the
// fleet-wide sum drops at once (each router writes its own count again,
// from zero, once it has applied the reset). It returns the revision and
// how many usage keys it deleted.
func ResetQuota(ctx context.Context, c KV, prefix, user string, r QuotaReset) (rev, deleted int64, err error) {
	b, err := json.Marshal(r)
	if err != nil {
		return 0, 0, err
	}
	kvs, _, err := c.Range(ctx, UsageDir(prefix)+user+"/")
	if err != nil {
		return 0, 0, fmt.Errorf("etcd: reading %s's usage: %w", user, err)
	}
	ops := []Op{PutOp(QuotaResetKey(prefix, user), b, 0)}
	for _, kv := range kvs[0] {
		ops = append(ops, DeleteOp(kv.Key))
	}
	rev, deleted, err = c.Txn(ctx, ops...)
	if err != nil {
		return 0, 0, fmt.Errorf("etcd: writing %s's quota reset: %w", user, err)
	}
	return rev, deleted, nil
}

// QuotaResetOf reads a quota reset key and its value: the user and the
// reset; ok is false for other keys and for values that do not decode
// (or have no time).
func (s *State) QuotaResetOf(key string, value []byte) (user string, r QuotaReset, ok bool) {
	if !under(s.prefix, resetDir, key) {
		return "", r, false
	}
	user = strings.TrimPrefix(key, s.prefix+resetDir)
	if user == "" || strings.Contains(user, "/") || json.Unmarshal(value, &r) != nil || r.At.IsZero() {
		return "", r, false
	}
	return user, r, true
}
