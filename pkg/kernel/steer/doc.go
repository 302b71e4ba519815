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
// build time.
package steer
