// Package etcdlab starts a real etcd server on loopback for tests: random
// free ports on 127.0.0.1, a temporary data directory, killed on test
// cleanup. It is test support only; the daemon never imports it.
package etcdlab

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

// Binary is the etcd server binary (Debian's etcd-server package installs
// /usr/bin/etcd).
var Binary = "etcd"

// Require skips the test when no etcd binary is installed; with
// SHAPERD_REQUIRE_NETNS=1 (CI) it fails instead.
func Require(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath(Binary)
	if err != nil {
		if os.Getenv(netnslab.RequireEnv) == "1" {
			t.Fatalf("etcd required (%s=1) but not installed (apt-get install etcd-server): %v", netnslab.RequireEnv, err)
		}
		t.Skipf("skipping: etcd not installed (apt-get install etcd-server; set %s=1 to fail instead): %v", netnslab.RequireEnv, err)
	}
	return path
}

// Server is one etcd process listening on loopback only.
type Server struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT.
	Endpoint string
	bin      string
	dir      string
	client   string
	peer     string
	cmd      *exec.Cmd
	log      *os.File
	t        testing.TB
	// ns is the namespace etcd runs in (StartIn); nil: the test's own.
	ns *netnslab.NS
	// TLS is set by StartTLS: the PEM files of the lab's CA and of a
	// client certificate it signed; etcd then requires client
	// certificates.
	TLS *TLSFiles
}

// Start starts etcd (Require first) and waits until it answers. It is
// stopped and its data removed on test cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, false)
}

// StartTLS is Start with TLS on the client port and client certificates
// required (see Server.TLS).
func StartTLS(t testing.TB) *Server {
	t.Helper()
	return start(t, true)
}

// StartIn is Start with etcd inside the network namespace ns (`ip netns
// exec`), on that namespace's loopback (127.0.0.1:2379, the peer port
// 2380: a namespace of the test's own has them free), so that a daemon
// started in ns reaches it as a router reaches its etcd. Endpoint is then
// a URL for clients in ns.
func StartIn(t testing.TB, ns *netnslab.NS) *Server {
	t.Helper()
	bin := Require(t)
	s := &Server{bin: bin, dir: t.TempDir(), t: t, ns: ns, client: "127.0.0.1:2379", peer: "127.0.0.1:2380"}
	s.Endpoint = "http://" + s.client
	t.Cleanup(func() { s.Stop() })
	s.Restart()
	return s
}

func start(t testing.TB, withTLS bool) *Server {
	t.Helper()
	bin := Require(t)
	s := &Server{bin: bin, dir: t.TempDir(), t: t}
	s.client = "127.0.0.1:" + freePort(t)
	s.peer = "127.0.0.1:" + freePort(t)
	s.Endpoint = "http://" + s.client
	if withTLS {
		files, err := makeTLS(filepath.Join(s.dir, "tls"))
		if err != nil {
			t.Fatal(err)
		}
		s.TLS = files
		s.Endpoint = "https://" + s.client
	}
	t.Cleanup(func() { s.Stop() })
	s.Restart()
	return s
}

// Restart starts the server again after Stop, on the same ports and data.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("etcdlab: Restart while running")
	}
	lf, err := os.OpenFile(filepath.Join(s.dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	s.log = lf
	args := []string{
		"--name", "lab",
		"--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", s.Endpoint,
		"--advertise-client-urls", s.Endpoint,
		"--listen-peer-urls", "http://" + s.peer,
		"--initial-advertise-peer-urls", "http://" + s.peer,
		"--initial-cluster", "lab=http://" + s.peer,
		"--initial-cluster-state", "new",
		"--logger", "zap", "--log-outputs", "stderr",
	}
	if s.TLS != nil {
		args = append(args, "--cert-file", s.TLS.ServerCert, "--key-file", s.TLS.ServerKey,
			"--trusted-ca-file", s.TLS.CA, "--client-cert-auth")
	}
	cmd := exec.Command(s.bin, args...)
	if s.ns != nil {
		cmd = s.ns.Command(append([]string{s.bin}, args...)...)
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("etcdlab: start %s: %v", s.bin, err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if s.healthy() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(lf.Name())
	s.t.Fatalf("etcdlab: etcd did not become healthy on %s:\n%s", s.client, log)
}

// Stop kills the server (SIGKILL: an outage, not a shutdown) and waits.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_, _ = s.cmd.Process.Wait()
	s.cmd = nil
	_ = s.log.Close()
}

// healthy asks etcd's /health endpoint.
func (s *Server) healthy() bool {
	hostport := s.client
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	var c net.Conn
	var err error
	if s.ns != nil {
		c, err = s.ns.DialContext(ctx, "tcp", hostport)
	} else if s.TLS != nil {
		var tc *tls.Config
		if tc, err = s.TLS.Config(); err != nil {
			return false
		}
		c, err = (&tls.Dialer{NetDialer: &d, Config: tc}).DialContext(ctx, "tcp", hostport)
	} else {
		c, err = d.DialContext(ctx, "tcp", hostport)
	}
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "GET /health HTTP/1.0\r\nHost: %s\r\n\r\n", hostport)
	buf := make([]byte, 512)
	n, _ := c.Read(buf)
	for n < len(buf) {
		m, err := c.Read(buf[n:])
		n += m
		if err != nil {
			break
		}
	}
	return strings.Contains(string(buf[:n]), `"health":"true"`)
}

// freePort returns a free TCP port on 127.0.0.1.
func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}
