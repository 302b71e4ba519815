package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
)

// Meta says who pushed a plan, when and from which file.
type Meta struct {
	PushedBy string    `json:"pushed_by,omitempty"`
	PushedAt time.Time `json:"pushed_at"`
	Source   string    `json:"source,omitempty"`
}

// Plan is a shared plan as stored: its documents and the etcd revision
// that wrote them (the largest mod revision of the plan's keys).
type Plan struct {
	Revision int64         `json:"revision"`
	Shared   config.Shared `json:"shared"`
	Meta     Meta          `json:"meta"`
}

// SharedFor returns the plan's documents named for messages:
// "fleet rev N: shared.toml" and "fleet rev N: users.toml".
func (p *Plan) SharedFor() *config.Shared {
	sh := p.Shared
	sh.Name = fmt.Sprintf("fleet rev %d: shared.toml", p.Revision)
	sh.UsersName = fmt.Sprintf("fleet rev %d: users.toml", p.Revision)
	return &sh
}

// Push writes sh under prefix in one transaction and returns the new
// revision. The caller validates sh first (`fleet push` does it like
// --check).
func Push(ctx context.Context, c KV, prefix string, sh *config.Shared, meta Meta) (int64, error) {
	mb, err := json.Marshal(meta)
	if err != nil {
		return 0, err
	}
	rev, _, err := c.Txn(ctx,
		PutOp(prefix+planShared, sh.Main, 0),
		PutOp(prefix+planUsers, sh.Users, 0),
		PutOp(prefix+planMeta, mb, 0),
	)
	if err != nil {
		return 0, fmt.Errorf("etcd: writing the plan under %s: %w", prefix+planDir, err)
	}
	return rev, nil
}

// Pull reads the current shared plan; nil (and no error) when none was
// pushed.
func Pull(ctx context.Context, c KV, prefix string) (*Plan, error) {
	kvs, _, err := c.Range(ctx, prefix+planDir)
	if err != nil {
		return nil, fmt.Errorf("etcd: reading %s: %w", prefix+planDir, err)
	}
	st := NewState(prefix)
	for _, kv := range kvs[0] {
		st.Put(kv.Key, kv.Value, kv.ModRevision)
	}
	return st.Plan(), nil
}
