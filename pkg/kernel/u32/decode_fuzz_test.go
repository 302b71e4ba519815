package u32

import "testing"

// FuzzParseObject (other tools' filters must not break a dump): any bytes
// as a dumped filter message give
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
