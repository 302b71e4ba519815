package fleetd

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/internal/lab/etcdlab"
	"github.com/shaperd/shaperd/pkg/config"
)

// cutProxy forwards TCP connections to target until cut; while cut it
// refuses new connections and has closed the open ones.
type cutProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, target: target}
	t.Cleanup(func() { l.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestAgentPartitionCompaction: a router cut off from etcd while the
// fleet goes on (new plans, then a compaction past its last revision)
// catches up with the newest plan when the link returns.
func TestAgentPartitionCompaction(t *testing.T) {
	s := etcdlab.Start(t)
	c := dial(t, s)
	ctx := t.Context()
	if _, err := fleet.Push(ctx, KV(c), "/p", sharedA, fleet.Meta{}); err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, s.Endpoint[len("http://"):])
	ac, err := Dial(&config.Fleet{Endpoints: []string{"http://" + proxy.l.Addr().String()}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	rec := newRecorder()
	var logs syncBuf
	a := NewAgent(ac, "/p", "r1", rec, slog.New(slog.NewTextHandler(&logs, nil)))
	go a.Run(ctx)
	rec.await(t, 5*time.Second, "the first plan", func() bool { return len(rec.plans) == 1 && rec.up })

	proxy.setCut(true)
	rec.await(t, 5*time.Second, "the link down", func() bool { return !rec.up })
	var last int64
	for _, rate := range []string{"3mbit", "4mbit", "5mbit"} {
		sh := *sharedA
		sh.Main = []byte("[tiers.basic]\nrate = \"" + rate + "\"\n")
		if last, err = fleet.Push(ctx, KV(c), "/p", &sh, fleet.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	proxy.setCut(false)
	rec.await(t, 20*time.Second, "the newest plan after the partition", func() bool {
		p := rec.plans[len(rec.plans)-1]
		return rec.up && p.Revision == last && string(p.Shared.Main) == "[tiers.basic]\nrate = \"5mbit\"\n"
	})
	if !strings.Contains(logs.String(), "fell behind compaction") {
		t.Errorf("the watch did not resume behind the compaction (the test shows nothing); log:\n%s", logs.String())
	}
}

// syncBuf is a log sink safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuf) String() string { s.mu.Lock(); defer s.mu.Unlock(); return string(s.b) }
