package u32

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
)

// prefixKeys are the keys matching the whole prefix p on the address at
// addrOff: one key per 32-bit word the prefix covers (IPv4: 1, IPv6: 1-4).
func prefixKeys(p netip.Prefix, addrOff int) []tcwire.U32Key {
	a := p.Addr().AsSlice()
	var keys []tcwire.U32Key
	for w := 0; w*32 < p.Bits(); w++ {
		n := min(p.Bits()-w*32, 32)
		mask := ^uint32(0) << (32 - n)
		keys = append(keys, tcwire.U32Key{
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
func keysPrefix(keys []tcwire.U32Key, v6 bool, addrOff int) (netip.Prefix, error) {
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
