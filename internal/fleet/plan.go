package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
)

// Meta says who pushed a plan, when and from which file.
type Meta struct {
	PushedBy string    `json:"pushed_by,omitempty"`
	PushedAt time.Time `json:"pushed_at"`
	// Source is the configuration file pushed, UsersSource its users
	// file (as the pushing machine named them): the shared documents are
	// named after them in messages, so that a router's refusal cites the
	// operator's file and line.
	Source      string `json:"source,omitempty"`
	UsersSource string `json:"users_source,omitempty"`
}

// docNames are the names of a plan's documents in messages: the base
// names of the files pushed, "shared.toml" and "users.toml" for a plan
// pushed without them.
func (m Meta) docNames() (main, users string) {
	main, users = "shared.toml", "users.toml"
	if m.Source != "" {
		main = filepath.Base(m.Source)
	}
	if m.UsersSource != "" {
		users = filepath.Base(m.UsersSource)
	}
	return main, users
}

// Plan is a shared plan as stored: its documents and the etcd revision
// that wrote them (the largest mod revision of the plan's keys).
type Plan struct {
	Revision int64         `json:"revision"`
	Shared   config.Shared `json:"shared"`
	Meta     Meta          `json:"meta"`
}

// SharedFor returns the plan's documents named for messages: "fleet rev
// N: campus.toml" and "fleet rev N: users.toml", after the files pushed
// (Meta), else "shared.toml".
func (p *Plan) SharedFor() *config.Shared {
	sh := p.Shared
	main, users := p.Meta.docNames()
	sh.Name = fmt.Sprintf("fleet rev %d: %s", p.Revision, main)
	sh.UsersName = fmt.Sprintf("fleet rev %d: %s", p.Revision, users)
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
