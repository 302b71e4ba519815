// Package bpfcls classifies packets into per-user HTB classes with an eBPF
// program (cls_bpf) that looks the packet's address up in two LPM-trie
// maps, so that adding, changing or removing a user's addresses is a map
// update: no tc write, no qdisc lock, microseconds (docs/classifier.md).
//
// # The program
//
// It is written in Go with cilium/ebpf's asm package (prog.go), so `go
// build` alone makes a working binary; no clang, no generated object. Per
// packet: the ethertype from skb->protocol (one 802.1Q/802.1ad tag in the
// packet is looked through), then the IPv4 or IPv6 destination looked up
// (as the key {match dst, address}), and on a miss the source ({match src,
// address}); a hit returns the entry's value, a miss returns 0. Addresses
// are read with LD_IND relative to the network header (SKF_NET_OFF), as
// u32 reads them, so a device without an Ethernet header works the same.
//
// # Classic mode, not direct-action
//
// The filter runs in cls_bpf's classic mode: the program's return value
// is the class id (0: no match, and HTB sends the packet to its default
// class, as with u32). In direct-action mode the program would return a
// verdict and set skb->tc_classid, but that field (qdisc_skb_cb) is 16
// bits: the kernel takes the major from the filter's TCA_BPF_CLASSID, so
// the program could only name minors of one qdisc. Classic mode returns
// the full major:minor from the map, and the filter needs no actions.
//
// # Maps (keys.go)
//
// One LPM trie per family, key {u32 prefixlen, u8 match, 3 zero bytes,
// address}, value the class id. The match byte keeps destination and
// source entries of one prefix apart. Any prefix length (IPv4 /0../32,
// IPv6 /0../128) works; the longest matching prefix wins.
//
// # One classifier per (device, qdisc)
//
// NewConn(conn, ifindex, parent, opts) manages the filter under qdisc
// parent (the HTB root 1:, or each per-queue tree under mq) with maps and
// program of its own, pinned in PinDir:
//
//	/sys/fs/bpf/shaperd/netns-INODE/ifindex-N/qdisc-MAJOR/{v4,v6,prog}
//
// bpffs is per mount namespace, not per network namespace: the namespace's
// nsfs inode keeps the pins of devices with the same index in different
// network namespaces apart. The filter is cls_bpf, priority Prio (99),
// handle 1, protocol all, name ProgName.
//
// # Adoption and drift
//
// Dump and Ensure find the objects through the pins, or, when the pins are
// gone (a new bpffs, e.g. under `ip netns exec`, which remounts /sys), through
// the program the attached filter runs (its id in the dump) and that
// program's maps; they must be shaperd's current ones (names, types, sizes,
// the program using exactly those maps). A restart therefore writes
// nothing. Dump returns the map entries as filters; when the tc filter is
// missing or runs another program, all of them are Damaged, so that Diff
// re-adds them and the Apply doing so attaches the program again (Ensure).
// Entries changed, added or deleted behind shaperd's back are simply what
// Dump shows: the daemon's Diff repairs them.
//
// Writes are counted as the daemon counts kernel writes: each map
// created, the program loaded, each filter request, each map update or
// delete that changed something. Pinning is not a write.
package bpfcls
