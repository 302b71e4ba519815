package daemon

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// memMoment is when the loop may return freed memory to the OS.
type memMoment int

const (
	// memFirstApply: after the first pass over the interfaces (READY=1).
	memFirstApply memMoment = iota
	// memTick: after each reconcile tick.
	memTick
	// memEvaluation: after a policy tick that evaluated the policy and
	// built the trees (both allocate per user).
	memEvaluation
	// memApply: after an apply of n changes.
	memApply
	// memScrape: after a /metrics scrape (any goroutine): with 10,000
	// users its series and the counter read before it allocate tens of
	// megabytes.
	memScrape
)

// freeOSMemory returns freed memory to the OS; tests count its calls.
var freeOSMemory = realFreeOSMemory

// realFreeOSMemory is debug.FreeOSMemory.
var realFreeOSMemory = debug.FreeOSMemory

// freeAfterChanges is the number of changes in one apply after which the
// daemon returns freed memory to the OS at once.
const freeAfterChanges = 1000

// liveHeap returns the bytes of heap objects the last GC found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// returnMemory is the one place the daemon gives memory back to the OS,
// when Options.ReturnMemory is set (the daemon process, not tests). It
// collects the garbage and returns the freed pages at the moments that
// leave garbage behind: after the first apply, after a reconcile tick that
// read counters (with 10,000 users a kernel dump allocates tens of
// megabytes for a moment), after a policy evaluation once ready, after
// an apply of freeAfterChanges changes or more (a reload with many new
// users, and each interface of the first apply: the verify dump that ends
// it leaves tens of megabytes that the next interface's apply would pile
// onto), and after a /metrics scrape. So the daemon's resident memory
// between passes is close to what it keeps (the desired trees, policy
// state) rather than to the GC's heap goal of the pass. It replaces a soft
// memory limit at 2x the live heap, which a dump's transient heap crossed,
// making the GC run continuously (1.5 s reconciles, 30% idle CPU at 10,000
// users x 2 directions).
//
// After the first apply it runs on the loop (the log line reports the
// live heap); otherwise beside it (one at a time), so that a request (a
// run-time user change) arriving meanwhile does not wait for the forced
// collection (about 15 ms at 10,000 users on a busy 2-core machine).
// memScrape comes from a scrape's goroutine: it reads no loop state.
func (d *Daemon) returnMemory(at memMoment, changes int) {
	if !d.opts.ReturnMemory {
		return
	}
	switch at {
	case memEvaluation:
		if !d.ready {
			return
		}
	case memApply:
		if changes < freeAfterChanges {
			return
		}
	}
	if at == memFirstApply {
		d.endStartGC()
		freeOSMemory()
		d.log.Info("memory returned after the first apply", "live_heap_mb", liveHeap()>>20)
		return
	}
	if d.returning.CompareAndSwap(false, true) {
		go func() {
			defer d.returning.Store(false)
			freeOSMemory()
		}()
	}
}

// goMemoryLimit is debug.SetMemoryLimit; tests replace it.
var goMemoryLimit = debug.SetMemoryLimit

// setMemoryLimit applies daemon.memory_limit (0: none) to the Go runtime,
// when Options.ReturnMemory is set (the daemon process, not tests), at
// the start and on every reload. The limit is soft: the collector runs
// more often as the heap nears it, it never refuses an allocation.
func (d *Daemon) setMemoryLimit(limit tbf.Size) {
	if !d.opts.ReturnMemory {
		return
	}
	l := int64(math.MaxInt64) // the runtime's "no limit"
	if limit != 0 {
		l = int64(min(uint64(limit), math.MaxInt64))
	}
	goMemoryLimit(l)
}

// StartGCPercent is the garbage collector's GOGC from the start until the
// first apply is done: loading, checking and first applying a large plan
// leave more garbage than anything later, and the peak resident memory is
// the live heap plus the garbage the collector lets pile up (GOGC percent
// of it). Not used when the GOGC environment variable is set.
const StartGCPercent = 50

// gcPercent is debug.SetGCPercent; tests replace it.
var gcPercent = debug.SetGCPercent

// startGC sets StartGCPercent for the start (Options.ReturnMemory: the
// daemon process; GOGC unset).
func (d *Daemon) startGC() {
	if !d.opts.ReturnMemory || os.Getenv("GOGC") != "" {
		return
	}
	d.startGOGC = gcPercent(StartGCPercent)
	d.startGCSet = true
}

// endStartGC restores the GOGC in force before startGC.
func (d *Daemon) endStartGC() {
	if d.startGCSet {
		gcPercent(d.startGOGC)
		d.startGCSet = false
	}
}
