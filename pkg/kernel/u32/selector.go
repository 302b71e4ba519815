package u32

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
)

// Selector flags (TC_U32_* in linux/pkt_cls.h).
const (
	flagTerminal  uint8 = 1
	flagOffset    uint8 = 2
	flagVarOffset uint8 = 4
	flagEat       uint8 = 8
)

// key is one struct tc_u32_key: the 32-bit word at Off (from the network
// header) masked with Mask must equal Val. Mask and Val are the word read
// big-endian, as tc prints them ("match 0xc6120500/0xffffff00 at 16").
type key struct {
	Mask, Val uint32
	Off       int32
	OffMask   int32
}

// selector is struct tc_u32_sel. Hoff/Hmask select the word hashed when the
// node links to a table; Hmask is read big-endian like the keys.
type selector struct {
	Flags    uint8
	Offshift uint8
	Offmask  uint16
	Off      uint16
	Offoff   int16
	Hoff     int16
	Hmask    uint32
	Keys     []key
}

const (
	selHeaderLen = 16
	keyLen       = 16
)

// marshal encodes s exactly as the kernel's struct tc_u32_sel (C layout:
// three bytes, one pad byte, 16-bit fields from offset 4, hmask at 12, keys
// from 16); big-endian fields are network order, the others host order.
func (s selector) marshal() []byte {
	b := make([]byte, selHeaderLen+keyLen*len(s.Keys))
	ne := binary.NativeEndian
	b[0], b[1], b[2] = s.Flags, s.Offshift, uint8(len(s.Keys))
	binary.BigEndian.PutUint16(b[4:], s.Offmask)
	ne.PutUint16(b[6:], s.Off)
	ne.PutUint16(b[8:], uint16(s.Offoff))
	ne.PutUint16(b[10:], uint16(s.Hoff))
	binary.BigEndian.PutUint32(b[12:], s.Hmask)
	for i, k := range s.Keys {
		o := b[selHeaderLen+keyLen*i:]
		binary.BigEndian.PutUint32(o[0:], k.Mask)
		binary.BigEndian.PutUint32(o[4:], k.Val)
		ne.PutUint32(o[8:], uint32(k.Off))
		ne.PutUint32(o[12:], uint32(k.OffMask))
	}
	return b
}

// parseSelector decodes a TCA_U32_SEL payload.
func parseSelector(b []byte) (selector, error) {
	if len(b) < selHeaderLen {
		return selector{}, fmt.Errorf("u32 selector of %d bytes, want at least %d", len(b), selHeaderLen)
	}
	n := int(b[2])
	if len(b) < selHeaderLen+keyLen*n {
		return selector{}, fmt.Errorf("u32 selector of %d bytes too short for %d keys", len(b), n)
	}
	ne := binary.NativeEndian
	s := selector{
		Flags:    b[0],
		Offshift: b[1],
		Offmask:  binary.BigEndian.Uint16(b[4:]),
		Off:      ne.Uint16(b[6:]),
		Offoff:   int16(ne.Uint16(b[8:])),
		Hoff:     int16(ne.Uint16(b[10:])),
		Hmask:    binary.BigEndian.Uint32(b[12:]),
	}
	for i := range n {
		o := b[selHeaderLen+keyLen*i:]
		s.Keys = append(s.Keys, key{
			Mask:    binary.BigEndian.Uint32(o[0:]),
			Val:     binary.BigEndian.Uint32(o[4:]),
			Off:     int32(ne.Uint32(o[8:])),
			OffMask: int32(ne.Uint32(o[12:])),
		})
	}
	return s, nil
}

// equal reports whether two selectors are the same.
func (s selector) equal(o selector) bool {
	if s.Flags != o.Flags || s.Offshift != o.Offshift || s.Offmask != o.Offmask || s.Off != o.Off ||
		s.Offoff != o.Offoff || s.Hoff != o.Hoff || s.Hmask != o.Hmask || len(s.Keys) != len(o.Keys) {
		return false
	}
	for i := range s.Keys {
		if s.Keys[i] != o.Keys[i] {
			return false
		}
	}
	return true
}

// prefixKeys are the keys matching the whole prefix p on the address at
// addrOff: one key per 32-bit word the prefix covers (IPv4: 1, IPv6: 1-4).
func prefixKeys(p netip.Prefix, addrOff int) []key {
	a := p.Addr().AsSlice()
	var keys []key
	for w := 0; w*32 < p.Bits(); w++ {
		n := min(p.Bits()-w*32, 32)
		mask := ^uint32(0) << (32 - n)
		keys = append(keys, key{
			Mask: mask,
			Val:  binary.BigEndian.Uint32(a[4*w:]) & mask,
			Off:  int32(addrOff + 4*w),
		})
	}
	return keys
}

// keysPrefix turns keys back into the prefix they match on the address at
// addrOff (16 bytes for IPv6, else 4). It fails unless the keys are exactly
// what prefixKeys produces: consecutive words from the address start, a
// contiguous mask, no bits outside the mask, no variable offsets.
func keysPrefix(keys []key, v6 bool, addrOff int) (netip.Prefix, error) {
	size := 4
	if v6 {
		size = 16
	}
	if len(keys) == 0 || len(keys)*4 > size {
		return netip.Prefix{}, fmt.Errorf("%d keys cannot form an address prefix", len(keys))
	}
	a := make([]byte, size)
	n := 0
	for w, k := range keys {
		switch {
		case k.Off != int32(addrOff+4*w):
			return netip.Prefix{}, fmt.Errorf("key %d at offset %d, want %d", w, k.Off, addrOff+4*w)
		case k.OffMask != 0:
			return netip.Prefix{}, fmt.Errorf("key %d has a variable offset", w)
		case k.Val&^k.Mask != 0:
			return netip.Prefix{}, fmt.Errorf("key %d value %08x has bits outside mask %08x", w, k.Val, k.Mask)
		}
		ones := bits.LeadingZeros32(^k.Mask)
		if ones == 0 || k.Mask != ^uint32(0)<<(32-ones) {
			return netip.Prefix{}, fmt.Errorf("key %d mask %08x is not a prefix mask", w, k.Mask)
		}
		if ones < 32 && w != len(keys)-1 {
			return netip.Prefix{}, fmt.Errorf("key %d mask %08x is partial but more keys follow", w, k.Mask)
		}
		binary.BigEndian.PutUint32(a[4*w:], k.Val)
		n += ones
	}
	addr, _ := netip.AddrFromSlice(a)
	return netip.PrefixFrom(addr, n), nil
}
