// Package kernel is the only package of shaperd that speaks netlink. It
// applies model.Changes to the kernel (qdiscs, HTB classes, leaf qdiscs, the
// ingress redirect to an IFB device, and, through pkg/kernel/u32, the hashed
// u32 user filters), dumps the actual model.Tree of a device with its
// counters, verifies a desired tree, manages IFB links and watches link
// events.
//
// Requests are encoded by hand on one mdlayher/netlink rtnetlink socket per
// Kernel, each acked; extended acks carry the kernel's reason into *Error.
// Runs of class and leaf-qdisc requests are pipelined (up to 64 per
// sendmsg, acks matched by sequence number; see Apply). go-tc is not used:
// its TBF has no 64-bit rate attributes and its u32 selector encoding is
// wrong (see pkg/kernel/u32). Links use vishvananda/netlink.
//
// Ownership: on a managed device shaperd owns the root qdisc. Its root is
// htb or tbf with handle 1:; any other root (pfifo_fast, mq, noqueue,
// fq_codel, or a foreign qdisc) is replaced when the tree is added, and
// Apply reports that in Result.Replaced. Below the root everything is
// shaperd's: classes and leaf qdiscs are made to match the desired tree.
// On other devices nothing is touched, except that ingress shaping adds the
// ingress qdisc ffff: (shared with other users of it) and one filter at
// priority RedirectPref. Teardown removes only those objects.
package kernel
