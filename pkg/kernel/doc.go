// Package kernel is the only package of shaperd that speaks netlink. It
// applies model.Changes to the kernel (qdiscs, HTB classes, leaf qdiscs, the
// ingress redirect to an IFB device, and the user filters through a
// classifier per device, or per queue's HTB under mq: pkg/kernel/bpfcls, an
// eBPF program over LPM-trie maps, or pkg/kernel/u32, hashed u32 filters;
// see SetClassifier and docs/classifier.md), dumps the actual model.Tree of a device with its
// counters, verifies a desired tree, manages IFB links and watches link
// events. It (with bpfcls) is also the only package that uses eBPF.
//
// # Netlink codec
//
// Traffic-control messages are encoded and decoded by hand with one codec,
// pkg/kernel/internal/tcwire, shared with pkg/kernel/u32: struct tcmsg,
// the attribute encoder and in-place walker, the rtnetlink/tc constants,
// and the C structures (tc_ratespec, tc_htb_opt, tc_htb_glob, tc_tbf_qopt,
// tc_sizespec, tc_sfq_qopt, tc_mirred, tc_u32_sel, gnet_stats_*) with
// named offsets, each pinned by a byte-layout test. encode.go turns model
// objects into tcwire structures and decode.go turns dumped ones back;
// neither reads a field at a literal offset. Decoders look at a dumped
// object's kind before its options: other kinds' attributes mean other
// things and are never interpreted.
//
// Requests go on one mdlayher/netlink rtnetlink socket per Kernel, each
// acked; extended acks carry the kernel's reason into *Error.
//
// Hand encoding is kept where it earns its place:
//   - pipelined class and leaf-qdisc changes: runs of requests are
//     written into one reused buffer and sent up to 64 per sendmsg, acks
//     matched by sequence number (pipeline.go, Apply). A library call per
//     request sends one message and waits for its ack
//     (BenchmarkApplyPipelined measures the difference);
//   - u32: the hashed filter tree is written node by node with handles,
//     links and hash masks chosen by pkg/kernel/u32, and its dump walks
//     tens of thousands of nodes;
//   - dumps: objects are decoded in place from the socket's buffers, with
//     no per-object attribute slice, decoder or kind string (a 10,000-user
//     dump is 20,000 classes and ~40,000 u32 nodes; the daemon's RSS and
//     idle CPU are dominated by it).
//
// vishvananda/netlink (already a dependency, used here for links, IFB
// devices and namespaces) encodes 64-bit TBF/HTB rates and u32 selectors
// correctly, but it is not used for these paths: its qdisc, class and
// filter calls each send one request and wait for its ack (no pipelining,
// no batch), its dumps build a full Go object with every attribute for
// each qdisc, class and filter (the allocation this package avoids), and
// its HTB class and TBF attributes carry no link-layer framing (overhead,
// mpu, ATM in the rate specs) and its qdiscs no size table (TCA_STAB),
// both of which shaperd writes. The rarely written objects (ingress qdisc, mirred redirect)
// are few enough bytes that they share the same codec rather than a
// second library path. go-tc is not used: its TBF has no 64-bit rate
// attributes and its u32 selector encoding is wrong (see pkg/kernel/u32).
//
// Ownership: on a managed device shaperd owns the root qdisc. Its root is
// htb or tbf with handle 1:; any other root (pfifo_fast, mq, noqueue,
// fq_codel, or a foreign qdisc) is replaced when the tree is added, and
// Apply reports that in Result.Replaced. Below the root everything is
// shaperd's: classes and leaf qdiscs are made to match the desired tree.
// On other devices nothing is touched, except that ingress shaping adds the
// ingress qdisc ffff: (shared with other users of it) and one filter at
// priority RedirectPref. Teardown removes only those objects, and the bpf
// classifier's pins under /sys/fs/bpf/shaperd.
package kernel
