package netnslab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// nextPort hands out iperf3 ports; namespaces are per test, so ports only
// need to be unique within this process.
var nextPort atomic.Uint32

func init() { nextPort.Store(5200) }

// Server is a one-off iperf3 server (`iperf3 -s -1`) running in a namespace.
type Server struct {
	NS   *NS
	Addr netip.Addr
	Port int
	cmd  *exec.Cmd
}

// StartServer starts `iperf3 -s -1 -B addr -p PORT` in ns on a fresh port,
// waits until it listens (up to 5 s) and kills it on test cleanup. It serves
// one test and then exits.
func StartServer(t testing.TB, ns *NS, addr netip.Addr) *Server {
	t.Helper()
	s := &Server{NS: ns, Addr: addr, Port: int(nextPort.Add(1))}
	s.cmd = ns.Command("iperf3", "-s", "-1", "-B", addr.String(), "-p", strconv.Itoa(s.Port))
	var out bytes.Buffer
	s.cmd.Stdout, s.cmd.Stderr = &out, &out
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("netns %s: start iperf3 server on [%s]:%d: %v", ns.Name, addr, s.Port, err)
	}
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-done
	})
	port := ":" + strconv.Itoa(s.Port)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-done:
			t.Fatalf("netns %s: iperf3 server on [%s]:%d exited: %s", ns.Name, addr, s.Port, out.String())
		default:
		}
		ls, err := ns.Run("ss", "-Hltn", "sport", "=", port)
		if err == nil && strings.Contains(ls, port) {
			return s
		}
	}
	t.Fatalf("netns %s: iperf3 server on [%s]:%d not listening after 5s", ns.Name, addr, s.Port)
	return nil
}

// ClientOptions tune an iperf3 client run.
type ClientOptions struct {
	// Seconds measured after the omitted first second (-t); 0 means 3.
	Seconds int
	// Streams is the number of parallel TCP streams (-P); 0 means 1.
	Streams int
}

// iperfResult is the part of iperf3's JSON output that we read.
type iperfResult struct {
	End struct {
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
	} `json:"end"`
	Error string `json:"error"`
}

// RunClient runs `iperf3 -J -c SERVER -B src -O 1 -t N` in ns against s and
// returns the receiver-side throughput in bits per second (end.sum_received,
// excluding the omitted first second).
func RunClient(ns *NS, src netip.Addr, s *Server, o ClientOptions) (float64, error) {
	secs, streams := o.Seconds, o.Streams
	if secs <= 0 {
		secs = 3
	}
	if streams <= 0 {
		streams = 1
	}
	out, err := ns.Run("iperf3", "-J", "-c", s.Addr.String(), "-p", strconv.Itoa(s.Port),
		"-B", src.String(), "-O", "1", "-t", strconv.Itoa(secs), "-P", strconv.Itoa(streams))
	bps, perr := ParseIperf3(out)
	if perr != nil {
		if err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("iperf3 %s -> [%s]:%d: %w", src, s.Addr, s.Port, perr)
	}
	return bps, nil
}

// ParseIperf3 returns end.sum_received.bits_per_second from iperf3's JSON
// output (-J), or iperf3's own error.
func ParseIperf3(out string) (float64, error) {
	var r iperfResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return 0, fmt.Errorf("parse iperf3 JSON: %w", err)
	}
	if r.Error != "" {
		return 0, fmt.Errorf("iperf3: %s", r.Error)
	}
	if r.End.SumReceived.BitsPerSecond <= 0 {
		return 0, fmt.Errorf("iperf3: no received throughput in output")
	}
	return r.End.SumReceived.BitsPerSecond, nil
}
