package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/shaperd/shaperd/pkg/policy"
)

// SetOverride writes a fleet override. One with an expiry (o.Until) is
// attached to a new lease of that many seconds (rounded up), so etcd
// removes it when it expires; routers also stop applying it at o.Until.
func SetOverride(ctx context.Context, c KV, prefix string, o policy.Override) error {
	if err := o.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	var lease int64
	if !o.Until.IsZero() {
		ttl := int64(math.Ceil(time.Until(o.Until).Seconds()))
		if ttl < 1 {
			ttl = 1
		}
		if lease, err = c.Grant(ctx, ttl); err != nil {
			return fmt.Errorf("etcd: lease for the override of %s: %w", o.Key(), err)
		}
	}
	ops := []Op{PutOp(overrideKey(prefix, o.Key()), b, lease)}
	if o.Direction == policy.DirBoth {
		// As policy.Overrides.Set: both directions replace the directed ones.
		ops = append([]Op{
			DeleteOp(overrideKey(prefix, policy.Key{Target: o.Target, Direction: policy.DirDownload})),
			DeleteOp(overrideKey(prefix, policy.Key{Target: o.Target, Direction: policy.DirUpload})),
		}, ops...)
	}
	if _, _, err = c.Txn(ctx, ops...); err != nil {
		return fmt.Errorf("etcd: writing the override of %s: %w", o.Key(), err)
	}
	return nil
}

// ClearOverride removes the fleet overrides of t in direction d (DirBoth:
// every direction) and returns how many there were.
func ClearOverride(ctx context.Context, c KV, prefix string, t policy.Target, d policy.Direction) (int64, error) {
	var ops []Op
	for _, dir := range []policy.Direction{policy.DirBoth, policy.DirDownload, policy.DirUpload} {
		if d == policy.DirBoth || dir == d {
			ops = append(ops, DeleteOp(overrideKey(prefix, policy.Key{Target: t, Direction: dir})))
		}
	}
	_, n, err := c.Txn(ctx, ops...)
	if err != nil {
		return 0, fmt.Errorf("etcd: clearing the overrides of %s: %w", t, err)
	}
	return n, nil
}

// Overrides lists the fleet overrides in force; keys that do not decode
// are returned as problems.
func Overrides(ctx context.Context, c KV, prefix string) ([]policy.Override, []string, error) {
	kvs, _, err := c.Range(ctx, prefix+overridesDir)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd: reading %s: %w", prefix+overridesDir, err)
	}
	st := NewState(prefix)
	for _, kv := range kvs[0] {
		st.Put(kv.Key, kv.Value, kv.ModRevision)
	}
	o, p := st.Overrides()
	return o, p, nil
}
