package bpfcls

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// ProgName is the name the classifier program is loaded with (and the
// cls_bpf filter's TCA_BPF_NAME). Its version suffix changes whenever the
// instructions or the map layout change, so that adoption (which compares
// names, not instructions) never keeps an old program.
const ProgName = "shaperd_cls_v1"

// Offsets into the BPF packet loads (linux/filter.h): LD_ABS/LD_IND
// offsets at or above skfNetOff are relative to the network header, those
// at or above skfLLOff to the link-layer (MAC) header.
const (
	skfNetOff int32 = -0x100000
	skfLLOff  int32 = -0x200000
)

// skbProtocolOff is offsetof(struct __sk_buff, protocol).
const skbProtocolOff = 16

// Ethertypes.
const (
	ethPIP     = 0x0800
	ethPIPv6   = 0x86dd
	ethP8021Q  = 0x8100
	ethP8021AD = 0x88a8
)

// keyOff is the stack offset (from R10) of the lookup key: prefixlen at
// +0, the match word at +4, the address at +8 (4 or 16 bytes).
const keyOff = -32

// program returns the classifier's instructions for the IPv4 and IPv6
// maps (file descriptors v4 and v6). It is a cls_bpf program in classic
// mode: the return value is the packet's class id, 0 "no match" (the
// qdisc's default class then).
//
//	r6 = skb; r7 = ethertype (skb->protocol; one 802.1Q/802.1ad tag is
//	looked through); r8 = base of the IP header for LD_IND:
//	SKF_NET_OFF (the network header), or SKF_LL_OFF+18 behind a tag.
//	IPv4: key {32+32, dst, daddr} in v4; miss: {32+32, src, saddr}.
//	IPv6: the same with 16-byte addresses in v6.
//	hit: return *value; miss: return 0.
//
// LD_IND loads return host-order words (ntohl); they are swapped back to
// network order before being stored in the key, since LPM tries compare
// the key's bytes from the first. A packet too short for a load ends the
// program with 0 (the kernel's LD_ABS/LD_IND semantics): default class.
func program(v4, v6 *ebpf.Map) asm.Instructions {
	lookup := func(m *ebpf.Map, match uint8, addrOff int32, words int, hit string) asm.Instructions {
		plen := int64(32 + 32*words)
		insns := asm.Instructions{
			asm.StoreImm(asm.R10, keyOff, plen, asm.Word),
			asm.StoreImm(asm.R10, keyOff+4, 0, asm.Word),
			asm.StoreImm(asm.R10, keyOff+4, int64(match), asm.Byte), // the match byte first, then 3 zero bytes
		}
		for w := range words {
			insns = append(insns,
				asm.LoadInd(asm.R0, asm.R8, addrOff+int32(4*w), asm.Word),
				asm.HostTo(asm.BE, asm.R0, asm.Word),
				asm.StoreMem(asm.R10, keyOff+8+int16(4*w), asm.R0, asm.Word),
			)
		}
		return append(insns,
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.Mov.Reg(asm.R2, asm.R10),
			asm.Add.Imm(asm.R2, keyOff),
			asm.FnMapLookupElem.Call(),
			asm.JNE.Imm(asm.R0, 0, hit),
		)
	}
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R7, asm.R6, skbProtocolOff, asm.Word),
		asm.HostTo(asm.BE, asm.R7, asm.Half), // be16 -> host
		asm.Mov.Imm(asm.R8, skfNetOff),
		asm.JEq.Imm(asm.R7, ethP8021Q, "vlan"),
		asm.JEq.Imm(asm.R7, ethP8021AD, "vlan"),
		asm.Ja.Label("l3"),
		// One tag in the packet: the inner ethertype is at MAC+16, the IP
		// header at MAC+18.
		asm.Mov.Imm(asm.R8, skfLLOff+18).WithSymbol("vlan"),
		asm.LoadInd(asm.R0, asm.R8, -2, asm.Half),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.JEq.Imm(asm.R7, ethPIP, "ipv4").WithSymbol("l3"),
		asm.JEq.Imm(asm.R7, ethPIPv6, "ipv6"),
		asm.Ja.Label("miss"),
	}
	v4insns := lookup(v4, matchByte(matchDst), 16, 1, "hit")
	v4insns[0] = v4insns[0].WithSymbol("ipv4")
	insns = append(insns, v4insns...)
	insns = append(insns, lookup(v4, matchByte(matchSrc), 12, 1, "hit")...)
	insns = append(insns, asm.Ja.Label("miss"))
	v6insns := lookup(v6, matchByte(matchDst), 24, 4, "hit")
	v6insns[0] = v6insns[0].WithSymbol("ipv6")
	insns = append(insns, v6insns...)
	insns = append(insns, lookup(v6, matchByte(matchSrc), 8, 4, "hit")...)
	insns = append(insns,
		asm.Mov.Imm(asm.R0, 0).WithSymbol("miss"),
		asm.Return(),
		asm.LoadMem(asm.R0, asm.R0, 0, asm.Word).WithSymbol("hit"),
		asm.Return(),
	)
	return insns
}

// programSpec is the classifier program for maps v4 and v6.
func programSpec(v4, v6 *ebpf.Map) *ebpf.ProgramSpec {
	return &ebpf.ProgramSpec{
		Name:         ProgName,
		Type:         ebpf.SchedCLS,
		Instructions: program(v4, v6),
		License:      "GPL",
	}
}
