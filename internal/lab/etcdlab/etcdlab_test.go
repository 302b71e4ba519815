package etcdlab

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestClientAgainstServer checks that the client module this repository
// uses speaks to the installed etcd server: put, transaction, lease with
// keep-alive, and a watch with progress notifications.
func TestClientAgainstServer(t *testing.T) {
	s := Start(t)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wctx := clientv3.WithRequireLeader(ctx)
	wch := c.Watch(wctx, "/t/", clientv3.WithPrefix(), clientv3.WithProgressNotify())
	tr, err := c.Txn(ctx).Then(clientv3.OpPut("/t/a", "1"), clientv3.OpPut("/t/b", "2")).Commit()
	if err != nil || !tr.Succeeded {
		t.Fatalf("txn: %v %v", tr, err)
	}
	lease, err := c.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	ka, err := c.KeepAlive(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ka; !ok {
		t.Fatal("keep-alive channel closed")
	}
	if _, err := c.Put(ctx, "/t/l", "x", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for seen < 3 {
		wr := <-wch
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		seen += len(wr.Events)
	}
	if err := c.RequestProgress(wctx); err != nil {
		t.Fatalf("progress request: %v", err)
	}
	wr := <-wch
	if !wr.IsProgressNotify() {
		t.Fatalf("want a progress notification, got %+v", wr)
	}
	g, err := c.Get(ctx, "/t/", clientv3.WithPrefix())
	if err != nil || len(g.Kvs) != 3 {
		t.Fatalf("get: %v %v", g, err)
	}
}
