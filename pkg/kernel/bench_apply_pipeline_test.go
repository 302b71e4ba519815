package kernel

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// sendPipelined sends one class request per class, batch requests per
// sendmsg, and reads all their acks before the next batch: what Apply
// would do if it pipelined. flags are the request flags besides
// Request|Acknowledge. It returns the number of acks read.
func sendPipelined(k *Kernel, ifi uint32, classes []model.Class, flags netlink.HeaderFlags, batch int) (int, error) {
	msgs := make([]netlink.Message, 0, batch)
	acks := 0
	flush := func() error {
		if len(msgs) == 0 {
			return nil
		}
		if _, err := k.conn.SendMessages(msgs); err != nil {
			return fmt.Errorf("send %d class requests: %w", len(msgs), err)
		}
		for got := 0; got < len(msgs); {
			ms, err := k.conn.Receive()
			if err != nil {
				return fmt.Errorf("ack %d of %d: %w", got+1, len(msgs), err)
			}
			got += len(ms)
			acks += len(ms)
		}
		msgs = msgs[:0]
		return nil
	}
	for i := range classes {
		c := &classes[i]
		at := attrs{b: tcmsg{Ifindex: ifi, Handle: uint32(c.Handle), Parent: uint32(c.Parent)}.appendTo(nil)}
		encodeHTBClass(&at, c)
		msgs = append(msgs, netlink.Message{
			Header: netlink.Header{Type: rtmNewTClass, Flags: netlink.Request | netlink.Acknowledge | flags},
			Data:   at.b,
		})
		if len(msgs) == batch {
			if err := flush(); err != nil {
				return acks, err
			}
		}
	}
	return acks, flush()
}

// BenchmarkApplyPipelined answers whether pipelining Apply's requests
// (several per sendmsg, acks read after) is worth it: per iteration it
// creates the classes of an n-user tree (root qdisc first, no filters) once
// through Apply and once pipelined, each followed by changing every class's
// rate, in one namespace; the order alternates per iteration. Metrics are
// wall seconds per phase and mode, and the process's system CPU seconds for
// the creations. Creation includes the kernel's O(n^2) class work; the
// change is linear (mostly per-message cost).
//
// n comes from BENCH_APPLY_USERS (default 10000), the batch size from
// BENCH_APPLY_BATCH (default 64); BENCH_APPLY_MODE=apply or pipelined runs
// one mode only (for perf stat). Run with -benchtime=3x.
func BenchmarkApplyPipelined(b *testing.B) {
	n, batch := envInt("BENCH_APPLY_USERS", 10000), envInt("BENCH_APPLY_BATCH", 64)
	ns, k := benchNS(b)
	tg := manyUsers("bench0", n, false)
	ids := model.NewAssignment()
	desired, err := model.Build(tg, ids)
	if err != nil {
		b.Fatal(err)
	}
	tg2 := tg
	tg2.Users = append([]model.UserTarget(nil), tg.Users...)
	for i := range tg2.Users {
		tg2.Users[i].Rate = 2 * tbf.Mbit
	}
	faster, err := model.Build(tg2, ids)
	if err != nil {
		b.Fatal(err)
	}
	create := model.Diff(model.Tree{Device: "bench0"}, desired)
	root, classes := create[:1], desired.Classes
	change := model.Diff(desired, faster)
	if len(change) != n {
		b.Fatalf("changing every user's rate gave %d changes, want %d", len(change), n)
	}
	ifi, err := k.ifindex("bench0")
	if err != nil {
		b.Fatal(err)
	}
	var applyCreate, pipeCreate, applyChange, pipeChange time.Duration
	sysCPU := map[*time.Duration]time.Duration{} // system CPU time per wall accumulator
	timed := func(acc *time.Duration, fn func() error) {
		b.Helper()
		s0 := sysTime()
		start := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		*acc += time.Since(start)
		sysCPU[acc] += sysTime() - s0
	}
	viaApply := func() {
		timed(&applyCreate, func() error { _, err := k.Apply(create[1:]); return err })
		timed(&applyChange, func() error { _, err := k.Apply(change); return err })
	}
	pipelined := func() {
		timed(&pipeCreate, func() error {
			acks, err := sendPipelined(k, ifi, classes, netlink.Create|netlink.Excl, batch)
			if err == nil && acks != len(classes) {
				err = fmt.Errorf("%d acks for %d classes", acks, len(classes))
			}
			return err
		})
		timed(&pipeChange, func() error { _, err := sendPipelined(k, ifi, faster.Classes[2:], 0, batch); return err })
	}
	// BENCH_APPLY_MODE=apply or pipelined runs one mode only (to trace it).
	modes := []func(){viaApply, pipelined}
	switch os.Getenv("BENCH_APPLY_MODE") {
	case "apply":
		modes = modes[:1]
	case "pipelined":
		modes = modes[1:]
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range modes {
			b.StopTimer()
			if _, err := k.Apply(root); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			modes[(i+j)%len(modes)]()
			b.StopTimer()
			if mism, err := k.Verify(faster); err != nil || len(mism) > 0 {
				b.Fatalf("tree differs from the plan: %v %v", mism, err)
			}
			ns.MustRun("tc", "qdisc", "del", "dev", "bench0", "root")
			b.StartTimer()
		}
	}
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(applyCreate), "s/create-apply")
	b.ReportMetric(per(pipeCreate), "s/create-pipelined")
	b.ReportMetric(per(applyChange), "s/change-apply")
	b.ReportMetric(per(pipeChange), "s/change-pipelined")
	b.ReportMetric(per(sysCPU[&applyCreate]), "sys-s/create-apply")
	b.ReportMetric(per(sysCPU[&pipeCreate]), "sys-s/create-pipelined")
}

// sysTime is the system CPU time of this process so far (the kernel work
// done in its syscalls, plus the runtime's own).
func sysTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Stime.Nano())
}

// envInt reads a positive integer from the environment, def when unset.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
