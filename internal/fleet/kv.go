package fleet

import "context"

// KV is what the fleet's shared requests (Push, Pull, SetOverride,
// ClearOverride, Overrides, Routers) need from etcd. Client (etcd's gRPC
// API, for shaperctl and `shaperd --check`) implements it, and so does
// fleetd.KV over etcd's clientv3 (the daemon). Errors are the client's,
// unwrapped; the callers add what they were doing.
type KV interface {
	// Range reads every key under each prefix (a key starting with it),
	// all at one revision, in one request. It returns the keys by prefix,
	// in key order, and that revision. No prefix: no keys, no request.
	Range(ctx context.Context, prefixes ...string) (kvs [][]KeyValue, rev int64, err error)
	// Txn applies ops in one transaction, all or none, and returns its
	// revision and how many keys its deletes removed (a delete of a
	// missing key removes none and is no error).
	Txn(ctx context.Context, ops ...Op) (rev, deleted int64, err error)
	// Grant creates a lease that etcd ends ttl seconds later (it is not
	// kept alive; etcd raises a ttl below its minimum, a few seconds, to
	// it) and returns its ID. Keys put with it are removed when it ends.
	Grant(ctx context.Context, ttl int64) (lease int64, err error)
}

// KeyValue is a key as read, with the revision that last wrote it.
type KeyValue struct {
	Key         string
	Value       []byte
	ModRevision int64
}

// Op is a put or a delete of one key in a transaction.
type Op struct {
	Key string
	// Delete: remove Key (Value and Lease unused); else put Value.
	Delete bool
	Value  []byte
	// Lease attaches the put key to a lease (Grant); 0: none.
	Lease int64
}

// PutOp puts value at key, attached to lease (0: none).
func PutOp(key string, value []byte, lease int64) Op {
	return Op{Key: key, Value: value, Lease: lease}
}

// DeleteOp removes key.
func DeleteOp(key string) Op { return Op{Key: key, Delete: true} }

// prefixEnd is the end of the key range of the keys starting with prefix
// (the range is [prefix, end)): prefix with its last byte below 0xff
// incremented and what follows dropped; "\x00" (to the end of the key
// space) when every byte is 0xff or prefix is empty.
func prefixEnd(prefix string) []byte {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}
