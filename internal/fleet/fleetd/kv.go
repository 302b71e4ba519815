package fleetd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shaperd/shaperd/internal/fleet"
)

// KV returns c as a fleet.KV, for fleet.Pull and the other shared
// requests on the daemon's client. Errors are clientv3's.
func KV(c *clientv3.Client) fleet.KV { return kv{c} }

type kv struct{ c *clientv3.Client }

// Range reads one prefix with a Get, several with a transaction of Gets.
func (k kv) Range(ctx context.Context, prefixes ...string) ([][]fleet.KeyValue, int64, error) {
	out := make([][]fleet.KeyValue, len(prefixes))
	switch len(prefixes) {
	case 0:
		return out, 0, nil
	case 1:
		resp, err := k.c.Get(ctx, prefixes[0], clientv3.WithPrefix())
		if err != nil {
			return nil, 0, err
		}
		out[0] = keyValues(resp)
		return out, resp.Header.Revision, nil
	}
	ops := make([]clientv3.Op, len(prefixes))
	for i, p := range prefixes {
		ops[i] = clientv3.OpGet(p, clientv3.WithPrefix())
	}
	resp, err := k.c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, 0, err
	}
	for i, r := range resp.Responses {
		out[i] = keyValues((*clientv3.GetResponse)(r.GetResponseRange()))
	}
	return out, resp.Header.Revision, nil
}

// keyValues copies a Get's keys.
func keyValues(r *clientv3.GetResponse) []fleet.KeyValue {
	out := make([]fleet.KeyValue, len(r.Kvs))
	for i, kv := range r.Kvs {
		out[i] = fleet.KeyValue{Key: string(kv.Key), Value: kv.Value, ModRevision: kv.ModRevision}
	}
	return out
}

// Txn commits ops as one transaction without conditions.
func (k kv) Txn(ctx context.Context, ops ...fleet.Op) (rev, deleted int64, err error) {
	cops := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		switch {
		case op.Delete:
			cops[i] = clientv3.OpDelete(op.Key)
		case op.Lease != 0:
			cops[i] = clientv3.OpPut(op.Key, string(op.Value), clientv3.WithLease(clientv3.LeaseID(op.Lease)))
		default:
			cops[i] = clientv3.OpPut(op.Key, string(op.Value))
		}
	}
	resp, err := k.c.Txn(ctx).Then(cops...).Commit()
	if err != nil {
		return 0, 0, err
	}
	for _, r := range resp.Responses {
		deleted += r.GetResponseDeleteRange().GetDeleted()
	}
	return resp.Header.Revision, deleted, nil
}

// Grant grants a lease of ttl seconds.
func (k kv) Grant(ctx context.Context, ttl int64) (int64, error) {
	l, err := k.c.Grant(ctx, ttl)
	if err != nil {
		return 0, err
	}
	return int64(l.ID), nil
}
