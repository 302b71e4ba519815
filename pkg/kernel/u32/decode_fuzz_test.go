package u32

import "testing"

// FuzzParseObject (issue 8 §4): any bytes as a dumped filter message give
// an error or an object, and a picture built from it gives filters: never
// a panic. Seeds are captured from the kernel (pkg/kernel's
// TestCaptureDecoderCorpus): shaperd's tables, links and nodes, and other
// tools' u32 with actions and cls_bpf filters.
func FuzzParseObject(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, o, err := parseObject(b)
		if err != nil {
			return
		}
		st := buildState([]object{o, o})
		_ = st.filters()
	})
}

// FuzzSelector: any bytes as TCA_U32_SEL give an error or a selector that
// encodes back to the bytes it was decoded from (up to its keys).
func FuzzSelector(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseSelector(b)
		if err != nil {
			return
		}
		enc := s.marshal()
		if s2, err := parseSelector(enc); err != nil || !s2.equal(s) {
			t.Fatalf("selector %+v: re-encoded %x decodes to %+v, %v", s, enc, s2, err)
		}
	})
}
