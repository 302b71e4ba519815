package control_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/controltest"
)

// peerRecorder records the peer of Clear calls.
type peerRecorder struct {
	controltest.Fake
	mu   sync.Mutex
	peer control.Peer
	ok   bool
}

func (p *peerRecorder) Clear(ctx context.Context, req control.ClearRequest) (*control.ClearResponse, error) {
	p.mu.Lock()
	p.peer, p.ok = control.PeerFrom(ctx)
	p.mu.Unlock()
	return &control.ClearResponse{Target: req.Target}, nil
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestPeerCredentialsAndLog(t *testing.T) {
	rec := &peerRecorder{}
	var logs syncBuffer
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := control.Listen(path, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := control.NewServer(rec, slog.New(slog.NewTextHandler(&logs, nil)))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()

	c := control.NewClient(path)
	if _, err := c.Clear(context.Background(), control.ClearRequest{Target: "alice"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	rec.mu.Lock()
	peer, ok := rec.peer, rec.ok
	rec.mu.Unlock()
	if !ok || int(peer.UID) != os.Getuid() || int(peer.PID) != os.Getpid() {
		t.Errorf("peer %+v (known %v), want uid %d pid %d", peer, ok, os.Getuid(), os.Getpid())
	}
	want := "msg=\"control request\" method=POST path=/v1/clear uid=" + strconv.Itoa(os.Getuid())
	if !strings.Contains(logs.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, logs.String())
	}

	// Shutdown stops Serve cleanly and removes the socket file.
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket file after Shutdown: %v", err)
	}
}
