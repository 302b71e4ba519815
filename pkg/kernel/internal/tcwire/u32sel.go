package tcwire

import (
	"encoding/binary"
	"fmt"
)

// Selector flags (TC_U32_* in linux/pkt_cls.h).
const (
	U32Terminal  uint8 = 1
	U32Offset    uint8 = 2
	U32VarOffset uint8 = 4
	U32Eat       uint8 = 8
)

// TCA_U32_FLAGS bits a request sets (TCA_CLS_FLAGS_SKIP_HW, _SKIP_SW);
// the kernel adds in_hw/not_in_hw on its own.
const U32UserFlags uint32 = 1 | 2

// U32RootHTID is TC_U32_ROOT: "the root table of this priority" in
// TCA_U32_HASH.
const U32RootHTID uint32 = 0xFFF00000

// U32Key is struct tc_u32_key: the 32-bit word at Off (from the network
// header) masked with Mask must equal Val. Mask and Val are the word read
// big-endian, as tc prints them ("match 0xc6120500/0xffffff00 at 16").
type U32Key struct {
	Mask, Val uint32
	Off       int32
	OffMask   int32
}

// U32Sel is struct tc_u32_sel. Hoff/Hmask select the word hashed when the
// node links to a table; Hmask is read big-endian like the keys.
type U32Sel struct {
	Flags    uint8
	Offshift uint8
	Offmask  uint16
	Off      uint16
	Offoff   int16
	Hoff     int16
	Hmask    uint32
	Keys     []U32Key
}

// U32SelLen is sizeof(struct tc_u32_sel) without keys; U32KeyLen is
// sizeof(struct tc_u32_key).
const (
	U32SelLen = 16
	U32KeyLen = 16
)

// Offsets in struct tc_u32_sel (flags u8, offshift u8, nkeys u8, a pad
// byte, offmask be16, off u16, offoff s16, hoff s16, hmask be32, keys) and
// struct tc_u32_key (mask be32, val be32, off s32, offmask s32).
const (
	selOffshiftOff = 1
	selNkeysOff    = 2
	selOffmaskOff  = 4
	selOffOff      = 6
	selOffoffOff   = 8
	selHoffOff     = 10
	selHmaskOff    = 12
	keyValOff      = 4
	keyOffOff      = 8
	keyOffmaskOff  = 12
)

// Marshal encodes s exactly as the kernel's struct tc_u32_sel (C layout:
// three bytes, one pad byte, 16-bit fields from offset 4, hmask at 12, keys
// from 16); big-endian fields are network order, the others host order.
func (s U32Sel) Marshal() []byte {
	b := make([]byte, U32SelLen+U32KeyLen*len(s.Keys))
	b[0], b[selOffshiftOff], b[selNkeysOff] = s.Flags, s.Offshift, uint8(len(s.Keys))
	binary.BigEndian.PutUint16(b[selOffmaskOff:], s.Offmask)
	ne.PutUint16(b[selOffOff:], s.Off)
	ne.PutUint16(b[selOffoffOff:], uint16(s.Offoff))
	ne.PutUint16(b[selHoffOff:], uint16(s.Hoff))
	binary.BigEndian.PutUint32(b[selHmaskOff:], s.Hmask)
	for i, k := range s.Keys {
		o := b[U32SelLen+U32KeyLen*i:]
		binary.BigEndian.PutUint32(o, k.Mask)
		binary.BigEndian.PutUint32(o[keyValOff:], k.Val)
		ne.PutUint32(o[keyOffOff:], uint32(k.Off))
		ne.PutUint32(o[keyOffmaskOff:], uint32(k.OffMask))
	}
	return b
}

// ParseU32Sel decodes a TCA_U32_SEL payload.
func ParseU32Sel(b []byte) (U32Sel, error) {
	if len(b) < U32SelLen {
		return U32Sel{}, fmt.Errorf("u32 selector of %d bytes, want at least %d", len(b), U32SelLen)
	}
	n := int(b[selNkeysOff])
	if len(b) < U32SelLen+U32KeyLen*n {
		return U32Sel{}, fmt.Errorf("u32 selector of %d bytes too short for %d keys", len(b), n)
	}
	s := U32Sel{
		Flags:    b[0],
		Offshift: b[selOffshiftOff],
		Offmask:  binary.BigEndian.Uint16(b[selOffmaskOff:]),
		Off:      ne.Uint16(b[selOffOff:]),
		Offoff:   int16(ne.Uint16(b[selOffoffOff:])),
		Hoff:     int16(ne.Uint16(b[selHoffOff:])),
		Hmask:    binary.BigEndian.Uint32(b[selHmaskOff:]),
	}
	for i := range n {
		o := b[U32SelLen+U32KeyLen*i:]
		s.Keys = append(s.Keys, U32Key{
			Mask:    binary.BigEndian.Uint32(o),
			Val:     binary.BigEndian.Uint32(o[keyValOff:]),
			Off:     int32(ne.Uint32(o[keyOffOff:])),
			OffMask: int32(ne.Uint32(o[keyOffmaskOff:])),
		})
	}
	return s, nil
}

// Equal reports whether two selectors are the same.
func (s U32Sel) Equal(o U32Sel) bool {
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
