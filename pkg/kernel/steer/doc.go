// Package steer puts each user's packets into the transmit queue that holds
// the user's HTB tree when an interface is shaped by per-queue trees under
// mq (model.QueueLayout): a cls_bpf program at the device's clsact egress
// hook looks the packet's user address up in two LPM-trie maps (IPv4 and
// IPv6) and writes the user's queue into skb->queue_mapping.
//
// The kernel honours that write only where it picks the queue from the
// skb itself (see docs/queues-mq.md for the measurements): for packets
// without a socket (forwarded, or redirected to an IFB device) when the
// device has no XPS map. Locally generated traffic keeps its socket's
// cached queue.
//
// The program is assembled in Go (cilium/ebpf's asm package): no clang at
// build time. Its name says its direction (shaperd_steer_d by destination,
// shaperd_steer_s by source). Pin and Adopt let a new process take over a
// Steerer's program and maps (pinned on bpffs, or found through the
// attached filter's program id), so that a restart neither replaces the
// filter nor refills the maps.
package steer
