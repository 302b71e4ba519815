package bpfcls

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"

	"github.com/shaperd/shaperd/pkg/kernel/filtercheck"
	"github.com/shaperd/shaperd/pkg/model"
)

// Map layout. Both maps are BPF_MAP_TYPE_LPM_TRIE with a key of
//
//	u32 prefixlen (host order) | u8 match | 3 zero bytes | address (4 or 16 bytes, network order)
//
// and a u32 value, the full class id (major:minor, host order). The match
// byte (0 destination, 1 source) and the zero bytes are part of every
// prefix, so prefixlen = 32 + the address prefix length: a destination
// and a source filter of the same prefix are two entries, and a lookup for
// one never finds the other. The zero bytes keep the address 4-aligned on
// the program's stack (the verifier rejects misaligned stack stores).
const (
	keyHeader = 8 // prefixlen + match word
	v4KeySize = keyHeader + 4
	v6KeySize = keyHeader + 16
	valueSize = 4
)

// Match bytes.
const (
	matchDst = model.MatchDst
	matchSrc = model.MatchSrc
)

func matchByte(m model.MatchField) uint8 {
	if m == model.MatchSrc {
		return 1
	}
	return 0
}

// Map names (BPF_OBJ_NAME_LEN: at most 15 characters).
const (
	v4MapName = "shaperd_v4"
	v6MapName = "shaperd_v6"
)

// DefaultMaxEntries is the capacity of each map (IPv4, IPv6) of one
// classifier: prefixes, not users. The tries are not preallocated
// (BPF_F_NO_PREALLOC, required for LPM tries), so memory grows with the
// entries actually stored.
const DefaultMaxEntries = 1 << 20

func mapSpec(name string, keySize, maxEntries uint32) *ebpf.MapSpec {
	return &ebpf.MapSpec{
		Name:       name,
		Type:       ebpf.LPMTrie,
		KeySize:    keySize,
		ValueSize:  valueSize,
		MaxEntries: maxEntries,
		Flags:      bpfFNoPrealloc,
	}
}

// bpfFNoPrealloc is BPF_F_NO_PREALLOC.
const bpfFNoPrealloc = 1

// key encodes filter f's prefix and match field as a map key: the IPv4
// map's for an IPv4 prefix, the IPv6 map's otherwise. Rejected: invalid,
// non-canonical (host bits set), IPv4-mapped IPv6 and zoned prefixes
// (filtercheck.BPFPrefix, which configuration checks use).
func key(p netip.Prefix, m model.MatchField) (b []byte, v6 bool, err error) {
	if err := filtercheck.BPFPrefix(p); err != nil {
		return nil, false, err
	}
	a := p.Addr()
	if m != model.MatchDst && m != model.MatchSrc {
		return nil, false, fmt.Errorf("match field %q is neither dst nor src", m)
	}
	raw := a.AsSlice()
	b = make([]byte, keyHeader+len(raw))
	binary.NativeEndian.PutUint32(b, uint32(32+p.Bits()))
	b[4] = matchByte(m)
	copy(b[keyHeader:], raw)
	return b, a.Is6(), nil
}

// parseKey decodes a map key (of either map) back to prefix and match
// field; ok is false for keys shaperd does not write (wrong size, a match
// byte other than 0 or 1, non-zero padding, a prefix length out of range
// or host bits set).
func parseKey(b []byte) (p netip.Prefix, m model.MatchField, ok bool) {
	if len(b) != v4KeySize && len(b) != v6KeySize {
		return p, "", false
	}
	plen := int(binary.NativeEndian.Uint32(b)) - 32
	if b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return p, "", false
	}
	switch b[4] {
	case 0:
		m = model.MatchDst
	case 1:
		m = model.MatchSrc
	default:
		return p, "", false
	}
	a, _ := netip.AddrFromSlice(b[keyHeader:])
	if plen < 0 || plen > a.BitLen() {
		return p, "", false
	}
	p = netip.PrefixFrom(a, plen)
	if p.Masked() != p {
		return p, "", false
	}
	return p, m, true
}

func value(c model.Handle) []byte {
	return binary.NativeEndian.AppendUint32(nil, uint32(c))
}
