package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shaperd/shaperd/pkg/policy"
)

// SetOverride writes a fleet override. One with an expiry (o.Until) is
// attached to a new lease of that many seconds (rounded up), so etcd
// removes it when it expires; routers also stop applying it at o.Until.
func SetOverride(ctx context.Context, c *clientv3.Client, prefix string, o policy.Override) error {
	if err := o.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	var opts []clientv3.OpOption
	if !o.Until.IsZero() {
		ttl := int64(math.Ceil(time.Until(o.Until).Seconds()))
		if ttl < 1 {
			ttl = 1
		}
		l, err := c.Grant(ctx, ttl)
		if err != nil {
			return fmt.Errorf("etcd: lease for the override of %s: %w", o.Key(), err)
		}
		opts = append(opts, clientv3.WithLease(l.ID))
	}
	if o.Direction == policy.DirBoth {
		// As policy.Overrides.Set: both directions replace the directed ones.
		_, err = c.Txn(ctx).Then(
			clientv3.OpDelete(overrideKey(prefix, policy.Key{Target: o.Target, Direction: policy.DirDownload})),
			clientv3.OpDelete(overrideKey(prefix, policy.Key{Target: o.Target, Direction: policy.DirUpload})),
			clientv3.OpPut(overrideKey(prefix, o.Key()), string(b), opts...),
		).Commit()
	} else {
		_, err = c.Put(ctx, overrideKey(prefix, o.Key()), string(b), opts...)
	}
	if err != nil {
		return fmt.Errorf("etcd: writing the override of %s: %w", o.Key(), err)
	}
	return nil
}

// ClearOverride removes the fleet overrides of t in direction d (DirBoth:
// every direction) and returns how many there were.
func ClearOverride(ctx context.Context, c *clientv3.Client, prefix string, t policy.Target, d policy.Direction) (int64, error) {
	var ops []clientv3.Op
	for _, dir := range []policy.Direction{policy.DirBoth, policy.DirDownload, policy.DirUpload} {
		if d == policy.DirBoth || dir == d {
			ops = append(ops, clientv3.OpDelete(overrideKey(prefix, policy.Key{Target: t, Direction: dir})))
		}
	}
	resp, err := c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("etcd: clearing the overrides of %s: %w", t, err)
	}
	var n int64
	for _, r := range resp.Responses {
		n += r.GetResponseDeleteRange().Deleted
	}
	return n, nil
}

// Overrides lists the fleet overrides in force; keys that do not decode
// are returned as problems.
func Overrides(ctx context.Context, c *clientv3.Client, prefix string) ([]policy.Override, []string, error) {
	resp, err := c.Get(ctx, prefix+overridesDir, clientv3.WithPrefix())
	if err != nil {
		return nil, nil, fmt.Errorf("etcd: reading %s: %w", prefix+overridesDir, err)
	}
	st := newState(prefix)
	for _, kv := range resp.Kvs {
		st.put(string(kv.Key), kv.Value, kv.ModRevision)
	}
	o, p := st.fleetOverrides()
	return o, p, nil
}
