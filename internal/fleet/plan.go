package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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
func Push(ctx context.Context, c *clientv3.Client, prefix string, sh *config.Shared, meta Meta) (int64, error) {
	mb, err := json.Marshal(meta)
	if err != nil {
		return 0, err
	}
	resp, err := c.Txn(ctx).Then(
		clientv3.OpPut(prefix+planShared, string(sh.Main)),
		clientv3.OpPut(prefix+planUsers, string(sh.Users)),
		clientv3.OpPut(prefix+planMeta, string(mb)),
	).Commit()
	if err != nil {
		return 0, fmt.Errorf("etcd: writing the plan under %s: %w", prefix+planDir, err)
	}
	return resp.Header.Revision, nil
}

// Pull reads the current shared plan; nil (and no error) when none was
// pushed.
func Pull(ctx context.Context, c *clientv3.Client, prefix string) (*Plan, error) {
	resp, err := c.Get(ctx, prefix+planDir, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd: reading %s: %w", prefix+planDir, err)
	}
	st := newState(prefix)
	for _, kv := range resp.Kvs {
		st.put(string(kv.Key), kv.Value, kv.ModRevision)
	}
	return st.current(), nil
}
