package tcwire

import "testing"

// FuzzSelector: any bytes as TCA_U32_SEL give an error or a selector that
// encodes back to the bytes it was decoded from (up to its keys).
func FuzzSelector(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseU32Sel(b)
		if err != nil {
			return
		}
		enc := s.Marshal()
		if s2, err := ParseU32Sel(enc); err != nil || !s2.Equal(s) {
			t.Fatalf("selector %+v: re-encoded %x decodes to %+v, %v", s, enc, s2, err)
		}
	})
}
