package netnslab

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Service is a daemon started from a systemd unit's command lines inside a
// namespace, the way systemd runs it on a router: ExecStartPre lines first
// (a failing one stops the start), then ExecStart, as the process `ip netns
// exec NS` becomes (same pid), with NOTIFY_SOCKET and WATCHDOG_USEC set as
// systemd sets them. No --netns: the daemon must work in the namespace it
// is started in.
type Service struct {
	Unit *Unit
	NS   *NS
	// Paths rewrites the unit's installed paths (binaries, config, socket)
	// to the test's.
	Paths map[string]string
	// Logs collects the daemon's standard output and error.
	Logs *LockedBuffer
	// Notify collects what the daemon sends to $NOTIFY_SOCKET.
	Notify *NotifySocket

	t    testing.TB
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartService runs the unit's ExecStartPre lines and starts its ExecStart
// line in ns. The daemon is killed on test cleanup if it still runs.
func StartService(t testing.TB, ns *NS, u *Unit, paths map[string]string) *Service {
	t.Helper()
	s := &Service{Unit: u, NS: ns, Paths: paths, Logs: &LockedBuffer{}, t: t}
	s.Notify = ListenNotify(t)
	for _, argv := range u.ExecStartPre {
		argv = Rewrite(argv, paths)
		if out, err := s.command(argv).CombinedOutput(); err != nil {
			t.Fatalf("ExecStartPre %s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	s.Start()
	t.Cleanup(func() {
		if s.Running() {
			s.Signal(syscall.SIGKILL)
			<-s.done
		}
	})
	return s
}

// Start starts ExecStart again (after Stop or Kill), with the same notify
// socket (its states forgotten, so WaitReady waits for the new process)
// and a fresh exit status.
func (s *Service) Start() {
	s.t.Helper()
	s.Notify.Reset()
	argv := Rewrite(s.Unit.ExecStart[0], s.Paths)
	s.cmd = s.command(argv)
	s.cmd.Stdout, s.cmd.Stderr = s.Logs, s.Logs
	s.cmd.Env = append(s.cmd.Env, "NOTIFY_SOCKET="+s.Notify.Path)
	if s.Unit.Watchdog > 0 {
		s.cmd.Env = append(s.cmd.Env, "WATCHDOG_USEC="+strconv.FormatInt(s.Unit.Watchdog.Microseconds(), 10))
	}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("ExecStart %s: %v", strings.Join(argv, " "), err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		s.err = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
}

// command is argv in the namespace with the unit's Environment=.
func (s *Service) command(argv []string) *exec.Cmd {
	cmd := s.NS.Command(argv...)
	cmd.Env = append(os.Environ(), s.Unit.Environment...)
	return cmd
}

// PID is the daemon's pid ($MAINPID): `ip netns exec` execs the command,
// so the pid of the started process is the daemon's.
func (s *Service) PID() int { return s.cmd.Process.Pid }

// Running reports whether the daemon has not exited.
func (s *Service) Running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Signal sends sig to the daemon.
func (s *Service) Signal(sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil && s.Running() {
		s.t.Errorf("signal %v to %d: %v", sig, s.PID(), err)
	}
}

// Wait waits up to d for the daemon to exit and returns its exit error
// (nil for exit status 0).
func (s *Service) Wait(d time.Duration) error {
	s.t.Helper()
	select {
	case <-s.done:
		return s.err
	case <-time.After(d):
		s.t.Fatalf("daemon %d still running after %v\n%s", s.PID(), d, s.Logs.String())
		return nil
	}
}

// Stop sends SIGTERM (the unit's KillSignal) and waits for the exit.
func (s *Service) Stop() error {
	s.Signal(syscall.SIGTERM)
	return s.Wait(30 * time.Second)
}

// WaitReady waits for READY=1 (Type=notify: systemd considers the service
// started then), at most the unit's TimeoutStartSec (or d when the unit
// sets none). It fails the test when the daemon exits first.
func (s *Service) WaitReady(d time.Duration) {
	s.t.Helper()
	if s.Unit.StartTimeout > 0 {
		d = s.Unit.StartTimeout
	}
	s.WaitNotify("READY=1", d)
}

// WaitNotify waits until the daemon has sent a notification containing
// state since the last call to Notify.Reset.
func (s *Service) WaitNotify(state string, d time.Duration) {
	s.t.Helper()
	for start := time.Now(); !s.Notify.Has(state); time.Sleep(10 * time.Millisecond) {
		if !s.Running() {
			s.t.Fatalf("daemon exited (%v) before %s\n%s", s.err, state, s.Logs.String())
		}
		if time.Since(start) > d {
			s.t.Fatalf("no %s from the daemon within %v; got %q\n%s", state, d, s.Notify.States(), s.Logs.String())
		}
	}
}

// Reload runs the unit's ExecReload lines ($MAINPID replaced) in the
// namespace, as `systemctl reload` does, and returns their combined output
// and the first error: a failing line fails the reload.
func (s *Service) Reload() (string, error) {
	paths := map[string]string{"$MAINPID": strconv.Itoa(s.PID())}
	for k, v := range s.Paths {
		paths[k] = v
	}
	var out bytes.Buffer
	for _, argv := range s.Unit.ExecReload {
		argv = Rewrite(argv, paths)
		b, err := s.command(argv).CombinedOutput()
		out.Write(b)
		if err != nil {
			return out.String(), fmt.Errorf("ExecReload %s: %w", strings.Join(argv, " "), err)
		}
	}
	return out.String(), nil
}

// NotifySocket is a unix datagram socket standing in for systemd's
// $NOTIFY_SOCKET: it records every state the daemon sends.
type NotifySocket struct {
	Path   string
	conn   *net.UnixConn
	mu     sync.Mutex
	states []string
}

// ListenNotify creates a notify socket in a temporary directory; it is
// closed on test cleanup.
func ListenNotify(t testing.TB) *NotifySocket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd-notify-")
	if err != nil {
		t.Fatal(err)
	}
	n := &NotifySocket{Path: filepath.Join(dir, "notify.sock")}
	n.conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.Path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.conn.Close(); os.RemoveAll(dir) })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := n.conn.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.states = append(n.states, strings.Split(strings.TrimSpace(string(buf[:k])), "\n")...)
			n.mu.Unlock()
		}
	}()
	return n
}

// States returns the states received since the last Reset, in order.
func (n *NotifySocket) States() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.states...)
}

// Has reports whether a received state starts with prefix.
func (n *NotifySocket) Has(prefix string) bool {
	for _, s := range n.States() {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// Reset forgets the states received so far.
func (n *NotifySocket) Reset() {
	n.mu.Lock()
	n.states = nil
	n.mu.Unlock()
}

// LockedBuffer is a bytes.Buffer safe for concurrent writers and readers.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
