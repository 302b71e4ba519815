package daemon

import (
	"runtime/debug"
	"runtime/metrics"
)

// MinAutoMemoryLimit is the least soft memory limit AutoMemoryLimit sets.
const MinAutoMemoryLimit = 48 << 20

// autoLimitPercent is the soft memory limit in percent of the live heap
// after the first apply.
const autoLimitPercent = 200

// liveHeap returns the bytes of heap objects the last GC found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// tuneMemory runs once after the first successful apply when
// Options.AutoMemoryLimit is set: it collects the garbage of the start
// (building and applying every interface's tree) and sets the runtime's
// soft memory limit to 200% of the heap that is then live, at least
// MinAutoMemoryLimit. Without a limit the GC's heap goal follows the live
// heap it finds in the middle of a reconcile dump (with 10,000 users a
// dump holds tens of megabytes for a moment) and RSS settles near 130 MB;
// with it, near 80 MB. A tighter limit is worse: one that a dump's
// transient heap crosses makes the GC run continuously (measured at
// 10,000 users: 140% gave 55-63 MB RSS but 1-5 s reconciles instead of
// 0.4 s). GOMEMLIMIT in the environment wins (the limit is then left
// alone).
func (d *Daemon) tuneMemory() {
	if !d.opts.AutoMemoryLimit || debug.SetMemoryLimit(-1) != int64(^uint64(0)>>1) {
		return
	}
	debug.FreeOSMemory()
	live := liveHeap()
	limit := max(int64(live)*autoLimitPercent/100, MinAutoMemoryLimit)
	debug.SetMemoryLimit(limit)
	d.log.Info("memory limit set", "live_heap_mb", live>>20, "limit_mb", limit>>20)
}
