package kernel

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// BenchmarkApplyPipelined measures what pipelining gains Apply: per
// iteration it creates the classes of an n-user tree (root qdisc first, no
// filters) once with Apply sending every request alone (pipelineDepth 1:
// one request per sendmsg, its ack awaited, as before Apply pipelined) and
// once with Apply's pipelining (BENCH_APPLY_BATCH requests per sendmsg,
// default pipelineDepth), each followed by changing every class's rate, in
// one namespace; the order alternates per iteration. Metrics are wall
// seconds per phase and mode ("-apply": depth 1, "-pipelined": pipelined)
// and the process's system CPU seconds for the creations. Creation includes
// the kernel's O(n^2) class work; the change is linear (mostly per-message
// cost).
//
// n comes from BENCH_APPLY_USERS (default 10000); BENCH_APPLY_MODE=apply or
// pipelined runs one mode only (for perf stat). Run with -benchtime=2x.
func BenchmarkApplyPipelined(b *testing.B) {
	n, batch := envInt("BENCH_APPLY_USERS", 10000), envInt("BENCH_APPLY_BATCH", pipelineDepth)
	defer func(d int) { pipelineDepth = d }(pipelineDepth)
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
	root := create[:1]
	change := model.Diff(desired, faster)
	if len(change) != n {
		b.Fatalf("changing every user's rate gave %d changes, want %d", len(change), n)
	}
	var applyCreate, pipeCreate, applyChange, pipeChange time.Duration
	sysCPU := map[*time.Duration]time.Duration{} // system CPU time per wall accumulator
	timed := func(acc *time.Duration, changes []model.Change, writes int) {
		b.Helper()
		s0 := sysTime()
		start := time.Now()
		res, err := k.Apply(changes)
		*acc += time.Since(start)
		sysCPU[acc] += sysTime() - s0
		if err != nil {
			b.Fatal(err)
		}
		if res.Writes != writes {
			b.Fatalf("Apply of %d changes: %d writes, want %d", len(changes), res.Writes, writes)
		}
	}
	modes := []func(){
		func() {
			pipelineDepth = 1
			timed(&applyCreate, create[1:], len(desired.Classes))
			timed(&applyChange, change, n)
		},
		func() {
			pipelineDepth = batch
			timed(&pipeCreate, create[1:], len(desired.Classes))
			timed(&pipeChange, change, n)
		},
	}
	// BENCH_APPLY_MODE=apply or pipelined runs one mode only (to trace it).
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
