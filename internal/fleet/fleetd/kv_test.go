package fleetd

import (
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/internal/lab/etcdlab"
	"github.com/shaperd/shaperd/pkg/config"
)

// TestKVSame: the daemon's KV (clientv3) and fleet.Client answer the same
// requests alike: ranges by prefix at one revision, a transaction's
// revision and deleted count, a lease a put is attached to.
func TestKVSame(t *testing.T) {
	s := etcdlab.Start(t)
	thin, err := fleet.Dial(&config.Fleet{Endpoints: []string{s.Endpoint}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer thin.Close()
	for _, c := range []struct {
		name string
		kv   fleet.KV
	}{{"clientv3", KV(dial(t, s))}, {"fleet.Client", thin}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			p := "/" + c.name
			rev, del, err := c.kv.Txn(ctx, fleet.PutOp(p+"/a/1", []byte("x"), 0), fleet.PutOp(p+"/a/2", []byte("y"), 0),
				fleet.PutOp(p+"/b/1", []byte("z"), 0), fleet.DeleteOp(p+"/none"))
			if err != nil || rev == 0 || del != 0 {
				t.Fatalf("txn: rev %d, deleted %d (%v)", rev, del, err)
			}
			kvs, rrev, err := c.kv.Range(ctx, p+"/a/", p+"/b/")
			if got := fmt.Sprint(kvs); err != nil || rrev != rev || got != fmt.Sprintf("[[{%[1]s/a/1 [120] %[2]d} {%[1]s/a/2 [121] %[2]d}] [{%[1]s/b/1 [122] %[2]d}]]", p, rev) {
				t.Fatalf("range: %s rev %d (%v); want the three keys at revision %d", got, rrev, err, rev)
			}
			if kvs, _, err := c.kv.Range(ctx); err != nil || len(kvs) != 0 {
				t.Errorf("range of no prefix: %v (%v)", kvs, err)
			}
			lease, err := c.kv.Grant(ctx, 60)
			if err != nil || lease == 0 {
				t.Fatalf("grant: %d (%v)", lease, err)
			}
			if _, _, err := c.kv.Txn(ctx, fleet.PutOp(p+"/l", nil, lease)); err != nil {
				t.Fatal(err)
			}
			if _, err := dial(t, s).Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
				t.Fatal(err)
			}
			_, del, err = c.kv.Txn(ctx, fleet.DeleteOp(p+"/a/1"), fleet.DeleteOp(p+"/a/2"), fleet.DeleteOp(p+"/l"))
			if err != nil || del != 2 {
				t.Errorf("deletes: %d deleted (%v); want 2 (the leased key went with its lease)", del, err)
			}
		})
	}
}
