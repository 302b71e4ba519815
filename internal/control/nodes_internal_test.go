package control

import (
	"strings"
	"testing"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// The server refuses malformed node requests before the daemon sees them.
func TestNodeRequestCheck(t *testing.T) {
	rate := func(r tbf.Rate) *tbf.Rate { return &r }
	for _, tc := range []struct {
		req  NodeRequest
		want string
	}{
		{NodeRequest{Op: "rename", Name: "a"}, "unknown node operation"},
		{NodeRequest{Op: NodeAdd}, "no node name"},
		{NodeRequest{Op: NodeAdd, Name: "a"}, "no rate given"},
		{NodeRequest{Op: NodeAdd, Name: "a", Rate: rate(0)}, "no rate given"},
		{NodeRequest{Op: NodeRemove, Name: "a", Parent: "b"}, "takes only the node's name"},
		{NodeRequest{Op: NodeAdd, Name: "a", Rate: rate(tbf.Mbit)}, ""},
		{NodeRequest{Op: NodeRemove, Name: "a"}, ""},
	} {
		err := tc.req.check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
}
