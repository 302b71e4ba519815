package fleet

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"
)

// tokenKey is the gRPC metadata key etcd reads an authentication token
// from.
const tokenKey = "token"

// Range implements KV: one Range request for one prefix, a transaction of
// Range requests for several (one revision for all).
func (c *Client) Range(ctx context.Context, prefixes ...string) ([][]KeyValue, int64, error) {
	out := make([][]KeyValue, len(prefixes))
	if len(prefixes) == 0 {
		return out, 0, nil
	}
	if len(prefixes) == 1 {
		var resp *pb.RangeResponse
		err := c.do(ctx, func(ctx context.Context) (err error) {
			resp, err = c.kv.Range(ctx, rangeOf(prefixes[0]))
			return err
		})
		if err != nil {
			return nil, 0, err
		}
		out[0] = keyValues(resp)
		return out, resp.GetHeader().GetRevision(), nil
	}
	req := &pb.TxnRequest{Success: make([]*pb.RequestOp, len(prefixes))}
	for i, p := range prefixes {
		req.Success[i] = &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: rangeOf(p)}}
	}
	var resp *pb.TxnResponse
	err := c.do(ctx, func(ctx context.Context) (err error) {
		resp, err = c.kv.Txn(ctx, req)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if len(resp.GetResponses()) != len(prefixes) {
		return nil, 0, fmt.Errorf("etcd answered %d reads of %d", len(resp.GetResponses()), len(prefixes))
	}
	for i, r := range resp.GetResponses() {
		out[i] = keyValues(r.GetResponseRange())
	}
	return out, resp.GetHeader().GetRevision(), nil
}

// rangeOf is the request of every key under prefix (linearizable, no
// limit).
func rangeOf(prefix string) *pb.RangeRequest {
	return &pb.RangeRequest{Key: []byte(prefix), RangeEnd: prefixEnd(prefix)}
}

// keyValues copies a range's keys.
func keyValues(r *pb.RangeResponse) []KeyValue {
	kvs := r.GetKvs()
	out := make([]KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = KeyValue{Key: string(kv.Key), Value: kv.Value, ModRevision: kv.ModRevision}
	}
	return out
}

// Txn implements KV with one unconditional Txn request.
func (c *Client) Txn(ctx context.Context, ops ...Op) (rev, deleted int64, err error) {
	req := &pb.TxnRequest{Success: make([]*pb.RequestOp, len(ops))}
	for i, op := range ops {
		if op.Delete {
			req.Success[i] = &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{
				RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(op.Key)}}}
		} else {
			req.Success[i] = &pb.RequestOp{Request: &pb.RequestOp_RequestPut{
				RequestPut: &pb.PutRequest{Key: []byte(op.Key), Value: op.Value, Lease: op.Lease}}}
		}
	}
	var resp *pb.TxnResponse
	err = c.do(ctx, func(ctx context.Context) (err error) {
		resp, err = c.kv.Txn(ctx, req)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	for _, r := range resp.GetResponses() {
		deleted += r.GetResponseDeleteRange().GetDeleted()
	}
	return resp.GetHeader().GetRevision(), deleted, nil
}

// Grant implements KV with a LeaseGrant request (etcd picks the ID).
func (c *Client) Grant(ctx context.Context, ttl int64) (int64, error) {
	var resp *pb.LeaseGrantResponse
	err := c.do(ctx, func(ctx context.Context) (err error) {
		resp, err = c.lease.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: ttl})
		return err
	})
	if err != nil {
		return 0, err
	}
	if resp.Error != "" {
		return 0, errors.New("etcd: " + resp.Error)
	}
	return resp.ID, nil
}

// do runs one request with the authentication token (getting one first
// when the client has a user name and none yet). When etcd says the token
// is no longer valid (it expired, or etcd restarted), it gets a new one and
// runs the request once more. Errors are etcd's own ("etcdserver: ...", as
// clientv3 returns them) when etcd sent one, else gRPC's.
func (c *Client) do(ctx context.Context, req func(ctx context.Context) error) error {
	for renew := false; ; renew = true {
		tok, err := c.authToken(ctx, renew)
		if err != nil {
			return err
		}
		rctx := ctx
		if tok != "" {
			rctx = metadata.AppendToOutgoingContext(ctx, tokenKey, tok)
		}
		err = rpctypes.Error(req(rctx))
		if !renew && tok != "" && errors.Is(err, rpctypes.ErrInvalidAuthToken) {
			continue
		}
		return err
	}
}

// authToken returns the token to send ("" without a user name, or when
// etcd's authentication is off), asking etcd for one when there is none
// yet or renew is set.
func (c *Client) authToken(ctx context.Context, renew bool) (string, error) {
	if c.user == "" {
		return "", nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.authed && !renew {
		return c.token, nil
	}
	resp, err := c.auth.Authenticate(ctx, &pb.AuthenticateRequest{Name: c.user, Password: c.pass})
	switch err = rpctypes.Error(err); {
	case errors.Is(err, rpctypes.ErrAuthNotEnabled):
		c.token, c.authed = "", true
	case err != nil:
		return "", fmt.Errorf("authenticating as %s: %w", c.user, err)
	default:
		c.token, c.authed = resp.Token, true
	}
	return c.token, nil
}
