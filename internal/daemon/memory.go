package daemon

import (
	"runtime/debug"
	"runtime/metrics"
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
)

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
// leave garbage behind: after the first apply, after each reconcile tick
// (with 10,000 users a kernel dump allocates tens of megabytes for a
// moment), after a policy evaluation once ready, and after an apply of
// freeAfterChanges changes or more once ready (a reload with many new
// users; the first apply is followed by memFirstApply). So the daemon's
// resident memory between passes is close to what it keeps (the desired
// trees, policy state) rather than to the GC's heap goal of the pass. One
// collection of the retained heap per reconcile interval costs little CPU.
// It replaces a soft memory limit at 2x the live heap, which a dump's
// transient heap crossed, making the GC run continuously (1.5 s
// reconciles, 30% idle CPU at 10,000 users x 2 directions).
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
		if !d.ready || changes < freeAfterChanges {
			return
		}
	}
	debug.FreeOSMemory()
	if at == memFirstApply {
		d.log.Info("memory returned after the first apply", "live_heap_mb", liveHeap()>>20)
	}
}
