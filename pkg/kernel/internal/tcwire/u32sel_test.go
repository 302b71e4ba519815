package tcwire

import (
	"encoding/binary"
	"testing"
)

// TestSelectorWireLayout pins the C layout of struct tc_u32_sel: pad byte
// at 3, offmask at 4, off 6, offoff 8, hoff 10, hmask 12, keys from 16.
func TestSelectorWireLayout(t *testing.T) {
	s := U32Sel{Flags: U32Terminal, Offshift: 2, Offmask: 0x0f00, Off: 0x1234, Offoff: -2, Hoff: 36, Hmask: 0x0000ff00,
		Keys: []U32Key{{Mask: 0xffffff00, Val: 0xc6120500, Off: 16, OffMask: 0}}}
	b := s.Marshal()
	if len(b) != 32 {
		t.Fatalf("length %d, want 32", len(b))
	}
	ne := binary.NativeEndian
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"flags", uint64(b[0]), 1},
		{"offshift", uint64(b[1]), 2},
		{"nkeys", uint64(b[2]), 1},
		{"pad", uint64(b[3]), 0},
		{"offmask (network order)", uint64(binary.BigEndian.Uint16(b[4:])), 0x0f00},
		{"off", uint64(ne.Uint16(b[6:])), 0x1234},
		{"offoff", uint64(ne.Uint16(b[8:])), 0xfffe},
		{"hoff", uint64(ne.Uint16(b[10:])), 36},
		{"hmask (network order)", uint64(binary.BigEndian.Uint32(b[12:])), 0x0000ff00},
		{"key mask", uint64(binary.BigEndian.Uint32(b[16:])), 0xffffff00},
		{"key val", uint64(binary.BigEndian.Uint32(b[20:])), 0xc6120500},
		{"key off", uint64(ne.Uint32(b[24:])), 16},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	back, err := ParseU32Sel(b)
	if err != nil || !back.Equal(s) {
		t.Errorf("round trip: %+v, %v; want %+v", back, err, s)
	}
	if _, err := ParseU32Sel(b[:20]); err == nil {
		t.Error("truncated key accepted")
	}
	if _, err := ParseU32Sel(b[:10]); err == nil {
		t.Error("truncated header accepted")
	}
}
