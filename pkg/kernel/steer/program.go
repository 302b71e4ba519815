package steer

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Offsets in struct __sk_buff (include/uapi/linux/bpf.h).
const (
	skbQueueMapping = 12
	skbData         = 76
	skbDataEnd      = 80
)

// Ethernet and IP header layout.
const (
	ethHeader  = 14
	ethType    = 12
	ipv4Header = 20
	ipv6Header = 40
	// ethPIP and ethPIPv6 are the ethertypes as a little-endian load of
	// the big-endian field reads them (the program runs on little-endian
	// hosts: amd64, arm64).
	ethPIP   = 0x0008
	ethPIPv6 = 0xDD86
	// tcActUnspec lets the packet go on to the next filter (or the qdisc):
	// steering never drops or redirects.
	tcActUnspec = -1
)

// QueueMappingBias is what the program adds to a user's queue index before
// writing skb->queue_mapping: the kernel's queue pick (netdev_pick_tx ->
// skb_tx_hash) treats a non-zero queue_mapping as a recorded receive queue
// plus one and transmits on queue_mapping-1.
const QueueMappingBias = 1

// addrOffsets returns where the user address starts in the IPv4 and IPv6
// header for match "dst" (downloads) or "src" (uploads).
func addrOffsets(matchSrc bool) (v4, v6 int16) {
	if matchSrc {
		return ethHeader + 12, ethHeader + 8
	}
	return ethHeader + 16, ethHeader + 24
}

// instructions assembles the steering program over the maps v4 and v6
// (their file descriptors).
func instructions(v4, v6 *ebpf.Map, matchSrc bool) asm.Instructions {
	off4, off6 := addrOffsets(matchSrc)
	ins := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, skbData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, skbDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, ethHeader),
		asm.JGT.Reg(asm.R4, asm.R3, "out"),
		asm.LoadMem(asm.R5, asm.R2, ethType, asm.Half),
		asm.JEq.Imm(asm.R5, ethPIP, "v4"),
		asm.JEq.Imm(asm.R5, ethPIPv6, "v6"),
		asm.Ja.Label("out"),

		// IPv4: key {prefixlen u32 = 32, addr [4]byte} at fp-8.
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("v4"),
		asm.Add.Imm(asm.R4, ethHeader+ipv4Header),
		asm.JGT.Reg(asm.R4, asm.R3, "out"),
		asm.LoadMem(asm.R5, asm.R2, off4, asm.Word),
		asm.StoreMem(asm.RFP, -4, asm.R5, asm.Word),
		asm.StoreImm(asm.RFP, -8, 32, asm.Word),
		asm.LoadMapPtr(asm.R1, v4.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.Ja.Label("found"),

		// IPv6: key {prefixlen u32 = 128, addr [16]byte} at fp-20.
		asm.Mov.Reg(asm.R4, asm.R2).WithSymbol("v6"),
		asm.Add.Imm(asm.R4, ethHeader+ipv6Header),
		asm.JGT.Reg(asm.R4, asm.R3, "out"),
	}
	for i := int16(0); i < 4; i++ {
		ins = append(ins,
			asm.LoadMem(asm.R5, asm.R2, off6+4*i, asm.Word),
			asm.StoreMem(asm.RFP, -16+4*i, asm.R5, asm.Word))
	}
	ins = append(ins,
		asm.StoreImm(asm.RFP, -20, 128, asm.Word),
		asm.LoadMapPtr(asm.R1, v6.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -20),
		asm.FnMapLookupElem.Call(),

		// R0: the user's queue index, or NULL.
		asm.JEq.Imm(asm.R0, 0, "out").WithSymbol("found"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
		asm.Add.Imm(asm.R1, QueueMappingBias),
		asm.StoreMem(asm.R6, skbQueueMapping, asm.R1, asm.Word),

		asm.Mov.Imm(asm.R0, tcActUnspec).WithSymbol("out"),
		asm.Return(),
	)
	return ins
}

// newProgram loads the steering program into the kernel.
func newProgram(v4, v6 *ebpf.Map, matchSrc bool) (*ebpf.Program, error) {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         progName(matchSrc),
		Type:         ebpf.SchedCLS,
		License:      "GPL",
		Instructions: instructions(v4, v6, matchSrc),
	})
	if err != nil {
		return nil, fmt.Errorf("load steering program: %w", err)
	}
	return p, nil
}
