// Package u32 classifies packets into per-user HTB classes with hashed u32
// filters, so that the cost per packet does not grow with the number of
// users.
//
// # Why u32 hash tables
//
// A linear list of u32 filters costs one selector test per user and packet
// (10,000 users: 3.6x slower TCP on veth, see docs/kernel.md). u32 can instead
// follow a "link" from a node into a hash table, picking the bucket from a
// masked byte of the packet (divisor <= 256, a power of two), and the kernel
// walks only that bucket. cls_bpf with LPM-trie maps is O(1) too and is
// shaperd's default where the kernel allows eBPF (pkg/kernel/bpfcls); u32
// is the fallback, and the choice of interfaces with classifier = "u32":
// its tables are plain kernel objects that `tc filter show` prints and any
// operator can inspect, and it needs nothing but CAP_NET_ADMIN.
//
// # How the kernel walks them (net/sched/cls_u32.c, u32_classify)
//
// In a bucket the nodes are tried in node id order. A node whose keys match
// either classifies (TC_U32_TERMINAL with a class id) or links into a
// table: the kernel pushes the node, hashes the link's selector word
// (hoff, hmask) to a bucket of the linked table and walks that. When no
// node of that bucket classifies, it pops back and continues with the node
// after the link (check_terminal). Links nest at most TC_U32_MAXDEPTH (8)
// deep; shaperd uses 2.
//
// # Layout
//
// Four u32 priorities under the HTB root (tc "pref"): 100 IPv4 dst, 101 IPv4
// src, 102 IPv6 dst, 103 IPv6 src (protocol ip / ipv6). Each root table
// (automatic id 800:, 801:, ...) holds the links first (node ids 1, 2),
// then the prefixes too wide for a hierarchy. Every hierarchy has two
// levels of 256 buckets:
//
//	hierarchy            level 1 (hashed byte)   level 2 (hashed byte)   root list
//	IPv4 (dst 0, src 1)  /17../24 (byte 2)       /25../32 (byte 3)       /1../16
//	IPv6 net (2, 3)      /49../56 (byte 6)       /57../64 (byte 7)       /1../48
//	IPv6 host (4, 5)     /113../120 (byte 14)    /121../128 (byte 15)
//
// Bytes are of the address: IPv4 src at offset 12 and dst at 16 of the IP
// header, IPv6 src at 8 and dst at 24. The hash key of a link is the 32-bit
// word holding the byte, masked to it ("hash mask 0000ff00 at 16": IPv4 dst
// 3rd octet). The IPv6 root links to the host hierarchy before the network
// one, so a /128 beats a /64.
//
// Table ids (htid, below the kernel's automatic 0x800..): level 1 of
// hierarchy h is 0x10+h; level 2 behind level-1 bucket b is 0x100*(h+1)+b
// (0x100..0x6ff). Level-1 tables and the root links are made by Ensure;
// a level-2 table and its link (node 1 of the level-1 bucket) by the first
// Add that needs it; they stay when empty.
//
// A prefix lives at the level whose hashed byte it partly or wholly fixes,
// replicated into every bucket its free bits of that byte can take (a /28:
// 16 buckets of level 2, a /24: one bucket of level 1, a /17: 128 of
// level 1; at most 128 copies, IPv6 /57 and /113 also 128). Every copy
// matches the FULL prefix (keys = the address words the prefix covers), so
// addresses that share a bucket (198.18.5.x and 198.19.5.x) stay apart.
// Within a bucket, node ids are grouped by prefix length, longest first
// (level tables: 256 ids per length from 0x010; IPv4 root: 255; IPv6 root:
// 85), and a new node takes the lowest free id of its length's group. So a
// packet meets the longest matching prefix first: level 2, then back in
// level 1, then back in the root list.
//
// A packet costs at most: root links + one level-1 bucket + one level-2
// bucket + the root list (prefixes /16 and wider, IPv6 /48 and wider),
// independent of the number of /17-and-longer users as long as they spread
// over the hashed bytes (10,000 random IPv4 hosts: a handful per bucket).
//
// Not supported (Add returns an error saying so): /0, IPv6 /65../112,
// prefixes with host bits set, IPv4-mapped IPv6 and zoned addresses.
//
// The IPv4 priorities come before the IPv6 ones and dst before src: on a
// device with both kinds of filters, a packet whose destination matches a
// dst filter is classified by it even if its source matches a src filter.
//
// # API
//
//	NewConn(conn, ifindex, parent)
//	Ensure() (writes, err)   priorities, level-1 tables and root links; no request when present
//	Add(f) (writes, err)     install, or fix in place (class change, damage)
//	Delete(f) (writes, err)  every node of f's prefix and match field
//	Dump() ([]Filter, err)   decoded, sorted, Damaged flagged
//	Remove() error           shaperd's four priorities and all in them
//	Close() error            forget the cached picture (socket untouched)
//
// Errors name the device (ifindex), qdisc, filter (match, prefix, class,
// user) and node handle, and wrap the *netlink.OpError whose Message is the
// kernel's extended-ack text.
//
// # Dump
//
// Dump decodes each classifying node's keys back to a prefix (the match
// field comes from the priority), groups the copies of one prefix, and
// marks a filter Damaged when its copies are not exactly its layout or a
// table or link on the way is missing or wrong, so that Diff re-creates it;
// Add repairs such a filter in place and Ensure repairs links.
//
// A priority deleted by hand (tc filter del ... pref 102) takes its root
// table with it, but the kernel keeps its other hash tables, hidden from
// dumps, until the qdisc's last u32 priority goes; re-creating one fails
// with EEXIST. Ensure (and Add) therefore create a missing priority empty
// first, dump, and reuse the tables that reappear (ensure.go, ensurePrios).
//
// # Netlink
//
// u32 requests are encoded by hand with pkg/kernel/internal/tcwire, the
// codec shared with pkg/kernel (message.go builds the requests and decodes
// dumped nodes; tcwire.U32Sel is struct tc_u32_sel), and sent on a plain
// rtnetlink socket given to NewConn: go-tc's U32Sel encoding
// puts the pad byte of struct tc_u32_sel at the end instead of after
// nkeys, which shifts offmask, off, offoff, hoff and hmask by one byte (a
// bug in go-tc), so match keys survive but hash keys do not.
package u32
