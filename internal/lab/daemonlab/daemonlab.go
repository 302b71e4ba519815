// Package daemonlab runs shaperd's daemon (internal/daemon, what
// cmd/shaperd runs) in this process on a lab's router kernel and records
// every kernel write it makes, so that labs and benchmarks measure the
// daemon's own apply step (policy, the incremental desired tree, Diff,
// Apply, Verify) rather than a copy of it.
//
// It is a lab tool: product code never imports it.
package daemonlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shaperd/shaperd/internal/daemon"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// Write is one kernel write of the daemon: the changes of one Apply call,
// when it started and ended, and its error.
type Write struct {
	Start, End time.Time
	Changes    []model.Change
	Result     kernel.Result
	Err        error
}

// Mid is the middle of the write.
func (w Write) Mid() time.Time { return w.Start.Add(w.End.Sub(w.Start) / 2) }

// Recorder is the daemon's kernel: the real one (every method of
// *kernel.Kernel), with each Apply recorded.
type Recorder struct {
	*kernel.Kernel
	mu     sync.Mutex
	writes []Write
	// mismatches are what the daemon's Verify calls found (the daemon
	// logs them and carries on; its next pass repairs).
	mismatches []string
}

// Verify verifies through the real kernel and records what it found.
func (r *Recorder) Verify(desired model.Tree) ([]string, error) {
	m, err := r.Kernel.Verify(desired)
	if len(m) > 0 {
		r.mu.Lock()
		r.mismatches = append(r.mismatches, strings.Join(m, "; "))
		r.mu.Unlock()
	}
	return m, err
}

// Mismatches returns what the daemon's verifications found since the
// last Reset, one line per Verify call that found something.
func (r *Recorder) Mismatches() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.mismatches...)
}

// Apply applies changes through the real kernel and records the call.
func (r *Recorder) Apply(changes []model.Change) (kernel.Result, error) {
	w := Write{Start: time.Now(), Changes: changes}
	w.Result, w.Err = r.Kernel.Apply(changes)
	w.End = time.Now()
	r.mu.Lock()
	r.writes = append(r.writes, w)
	r.mu.Unlock()
	return w.Result, w.Err
}

// Writes returns the writes recorded since the last Reset.
func (r *Recorder) Writes() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Write(nil), r.writes...)
}

// Reset forgets the recorded writes and mismatches.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.writes, r.mismatches = nil, nil
	r.mu.Unlock()
}

// Lab is a daemon running on a router namespace's kernel.
type Lab struct {
	// Daemon is the daemon, made as cmd/shaperd makes it (daemon.New)
	// but with the recording kernel.
	Daemon *daemon.Daemon
	// Kernel records the daemon's writes.
	Kernel *Recorder
	// Dir holds the configuration and the state directory.
	Dir string

	cancel context.CancelFunc
	done   chan error
}

// Options configure Start.
type Options struct {
	// NetNS is the router's network namespace (as `ip netns` names it).
	NetNS string
	// Main is shaperd.toml without its [daemon] table, Users the users
	// file; Start adds a [daemon] table with the socket and the state
	// directory in Dir. Daemon holds extra [daemon] keys ("key = value"
	// lines).
	Main, Users, Daemon string
	// Log receives the daemon's logs (text); nil discards them.
	Log io.Writer
}

// Start writes the configuration into a new directory under dir (a test's
// t.TempDir(), or os.MkdirTemp's), opens the kernel in o.NetNS and makes
// the daemon. It does not apply anything: call Once, or Run.
func Start(dir string, o Options) (*Lab, error) {
	d, err := os.MkdirTemp(dir, "daemonlab-")
	if err != nil {
		return nil, err
	}
	main := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n%s\n%s", filepath.Join(d, "shaperd.sock"),
		filepath.Join(d, "state"), o.Daemon, o.Main)
	if strings.Contains(o.Main, "[daemon]") {
		return nil, errors.New("daemonlab: Options.Main has a [daemon] table: put its keys in Options.Daemon")
	}
	if err := os.WriteFile(filepath.Join(d, "shaperd.toml"), []byte(main), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(d, "users.toml"), []byte(o.Users), 0o644); err != nil {
		return nil, err
	}
	k, err := kernel.Open(kernel.Options{NetNS: o.NetNS})
	if err != nil {
		return nil, fmt.Errorf("daemonlab: open the kernel in %s: %w", o.NetNS, err)
	}
	rec := &Recorder{Kernel: k}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.Log != nil {
		log = slog.New(slog.NewTextHandler(o.Log, nil))
	}
	dm, err := daemon.New(daemon.Options{ConfigPath: filepath.Join(d, "shaperd.toml"), Kernel: rec, Logger: log})
	if err != nil {
		k.Close()
		return nil, fmt.Errorf("daemonlab: %w", err)
	}
	return &Lab{Daemon: dm, Kernel: rec, Dir: d}, nil
}

// Once applies the plan (daemon.Once: the first apply, or a re-apply).
func (l *Lab) Once(ctx context.Context) error { return l.Daemon.Once(ctx) }

// Run starts the daemon's loop (policy ticks, reconciles, the control
// socket) in the background until Close.
func (l *Lab) Run() {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan error, 1)
	go func() { l.done <- l.Daemon.Run(ctx) }()
}

// Stop stops the loop started by Run and waits for it (nothing when none
// runs); the daemon stays open, so that Once, Daemon.Teardown or Close may
// follow on this goroutine.
func (l *Lab) Stop() error {
	if l.cancel == nil {
		return nil
	}
	l.cancel()
	err := <-l.done
	l.cancel = nil
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Close stops the loop (when running) and the daemon, which closes the
// kernel; the kernel's shaping stays, as when shaperd stops.
func (l *Lab) Close() error {
	var err error
	if l.cancel != nil {
		l.cancel()
		if e := <-l.done; e != nil && !errors.Is(e, context.Canceled) {
			err = e
		}
		l.cancel = nil
	}
	return errors.Join(err, l.Daemon.Close())
}
