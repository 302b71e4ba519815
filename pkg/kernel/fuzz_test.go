package kernel

import (
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
)

// FuzzDecodeObject (no kernel state, other tools' objects included, may
// make shaperd fail or panic): any bytes as the body of a
// dumped qdisc, class or filter message give an error or an object, and
// every decoder shaperd runs on objects (HTB class and qdisc, TBF, leaf,
// redirect, stats) gives an error or a value: never a panic. The seed
// corpus is captured from the kernel (TestCaptureDecoderCorpus), with
// other tools' objects (tbf 8001:, mirred, u32 with actions, cls_bpf).
func FuzzDecodeObject(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := parseObject(b)
		if err != nil {
			return
		}
		_, _ = decodeHTBClass(o)
		_, _ = decodeHTBQdisc(o)
		_, _ = decodeTBF(o)
		_ = decodeLeaf(o)
		_, _ = decodeRedirect(o)
		_ = IsForeignRoot(o.kind, model.Handle(o.msg.Handle))
		_ = parseStats2(o.options)
	})
}
