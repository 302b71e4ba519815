// Command benchapply measures shaperd's daemon applying its plan against
// tc -batch in throwaway network namespaces, for scripts/bench-apply.sh.
// The shaperd side is the daemon itself (internal/daemon, made by
// internal/lab/daemonlab in the lab's namespace, its kernel writes
// recorded), not a copy of its apply path:
//
//	(a) the daemon's cold apply of an N-user plan on an empty device
//	    (daemonlab.Start + Daemon.Once) vs `tc -batch` creating the same
//	    classes and filters (a flat u32 list, and optionally shaperd's
//	    hashed layout), interleaved;
//	(b) one user's rate change (Daemon.SetRate, ramp 0) in the N-user tree
//	    and in a small tree: end to end and its kernel Apply;
//	(c) re-applying the unchanged N-user tree (Daemon.Once again);
//	(d) iperf3 throughput to the user whose filter the daemon added last
//	    of N vs a tree with that user alone (median of interleaved runs);
//	(e)-(g) per-queue trees (queues.go);
//	(h) with -hierarchy: a network hierarchy of sites, buildings and
//	    access points (hierarchy.go).
//
// The internal pieces the earlier versions timed on their own are Go
// benchmarks of the packages that own them: model.Build and Diff
// (pkg/model BenchmarkBuild10k, BenchmarkDiff10k*), one class change
// through the kernel (pkg/kernel BenchmarkOneUserChange), a 10,000-user
// dump (pkg/kernel BenchmarkDump) and the daemon's set-rate on a fake
// kernel (internal/daemon BenchmarkSetRate10kUsers).
//
// Every round makes its own namespaces (PREFIX-rR-WHAT) and deletes them
// before the next one. It prints one line per measurement and a summary
// with PASS/MISS per target; misses are results, not errors. Run as root.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	var o options
	flag.IntVar(&o.users, "users", 10000, "users in the big tree")
	flag.IntVar(&o.small, "small", 10, "users in the small tree of (b)")
	flag.IntVar(&o.rounds, "r", 3, "rounds of shaperd, tc flat, tc hashed; who goes first rotates")
	flag.IntVar(&o.changes, "changes", 1000, "(b): one-user rate changes (Daemon.SetRate) per tree, spread over the rounds")
	flag.BoolVar(&o.hashed, "hashed", true, "also time tc -batch building shaperd's hashed u32 layout")
	flag.StringVar(&o.classifier, "classifier", "", "the daemon's classifier key in every plan: bpf, u32, or \"\" for its default (bpf where the kernel allows it)")
	flag.IntVar(&o.tpRuns, "throughput-runs", 3, "(d): iperf3 runs per lab (1 user, USERS users), interleaved; 0 skips (d)")
	flag.IntVar(&o.tpSeconds, "throughput-seconds", 3, "(d): seconds per iperf3 run (after one omitted second)")
	flag.StringVar(&o.prefix, "prefix", "benchapply", "namespace name prefix (unique per run)")
	flag.StringVar(&o.dir, "dir", os.TempDir(), "directory for the batch files, the daemons' directories and logs")
	flag.IntVar(&o.queues, "queues", 0, "(e)-(g): per-queue trees on an N-queue veth; 0 skips them")
	flag.IntVar(&o.queueBig, "queue-big", 0, "(f): users on one N-queue interface (e.g. 100000); 0 skips (f)")
	flag.IntVar(&o.queueTPRuns, "queue-tp-runs", 0, "(g): iperf3 runs per lab (one tree, N queues); 0 skips (g)")
	flag.BoolVar(&o.queuesOnly, "queues-only", false, "run only (e)-(g)")
	flag.BoolVar(&o.hierarchy, "hierarchy", false, "run only (h), the network hierarchy")
	flag.IntVar(&o.hier.Users, "hier-users", 10000, "(h): users")
	flag.IntVar(&o.hier.APs, "hier-aps", 500, "(h): access points (nodes), the users spread evenly over them")
	flag.IntVar(&o.hier.Buildings, "hier-buildings", 50, "(h): buildings (nodes), the APs spread evenly over them")
	flag.IntVar(&o.hier.Sites, "hier-sites", 5, "(h): sites (top-level nodes), the buildings spread evenly over them")
	flag.IntVar(&o.hierChanges, "hier-changes", 200, "(h): user moves and node changes of each kind, spread over the rounds")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "benchapply:", err)
		os.Exit(1)
	}
}
