// Command benchapply measures shaperd's kernel apply path against tc
// -batch in throwaway network namespaces, for scripts/bench-apply.sh:
//
//	(a) applying an N-user plan on an empty device (Dump, Build, Diff,
//	    Apply) vs `tc -batch` creating the same classes and filters (a flat
//	    u32 list, and optionally shaperd's hashed layout), interleaved;
//	(b) one user's rate change in the N-user tree and in a small tree;
//	(c) re-applying the unchanged N-user tree;
//	(d) iperf3 throughput to the user whose filter shaperd added last of N
//	    vs a tree with that user alone (median of interleaved runs).
//
// Every round makes its own namespaces (PREFIX-rR-WHAT) and deletes them
// before the next one. It prints one line per measurement and a summary
// with PASS/MISS per target; misses are results, not errors. Run as root.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/shaperd/shaperd/pkg/kernel"
)

func main() {
	var o options
	flag.IntVar(&o.users, "users", 10000, "users in the big tree")
	flag.IntVar(&o.small, "small", 10, "users in the small tree of (b)")
	flag.IntVar(&o.rounds, "r", 3, "rounds of shaperd, tc flat, tc hashed; who goes first rotates")
	flag.IntVar(&o.kernelChanges, "kernel-changes", 1000, "(b): kernel Applies of one rate change per tree, spread over the rounds")
	flag.IntVar(&o.changes, "changes", 200, "(b): Build+Diff+Apply rate changes per tree, spread over the rounds")
	flag.IntVar(&o.reconciles, "reconciles", 10, "full daemon reconciles per tree and round for (b)")
	flag.BoolVar(&o.hashed, "hashed", true, "also time tc -batch building shaperd's hashed u32 layout")
	flag.IntVar(&o.tpRuns, "throughput-runs", 3, "(d): iperf3 runs per lab (1 user, USERS users), interleaved; 0 skips (d)")
	flag.IntVar(&o.tpSeconds, "throughput-seconds", 3, "(d): seconds per iperf3 run (after one omitted second)")
	flag.StringVar(&o.prefix, "prefix", "benchapply", "namespace name prefix (unique per run)")
	flag.StringVar(&o.dir, "dir", os.TempDir(), "directory for the batch files")
	flag.IntVar(&o.queues, "queues", 0, "(e)-(g): per-queue trees on an N-queue veth; 0 skips them")
	flag.IntVar(&o.queueBig, "queue-big", 0, "(f): users on one N-queue interface (e.g. 100000); 0 skips (f)")
	flag.IntVar(&o.queueTPRuns, "queue-tp-runs", 0, "(g): iperf3 runs per lab (one tree, N queues); 0 skips (g)")
	flag.BoolVar(&o.queuesOnly, "queues-only", false, "run only (e)-(g)")
	flag.StringVar(&o.queueClassifier, "queue-classifier", kernel.ClassifierBPF, "(e)-(g): the classifier of shaperd's trees, bpf (one per queue's HTB) or u32")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "benchapply:", err)
		os.Exit(1)
	}
}
