package cli

import (
	"cmp"
	"io"
	"slices"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/jsonout"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// topSnapshot is one `top --json` line.
type topSnapshot struct {
	Generated time.Time            `json:"generated"`
	Total     tbf.Rate             `json:"total"`
	Users     []control.UserStatus `json:"users"`
}

// writeTopJSON writes one snapshot as a line of JSON: the users heaviest
// first, as top shows them.
func writeTopJSON(out io.Writer, st *control.Status) error {
	users := slices.Clone(st.Users)
	slices.SortStableFunc(users, func(a, b control.UserStatus) int {
		return cmp.Or(cmp.Compare(b.Throughput, a.Throughput), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Interface, b.Interface))
	})
	snap := topSnapshot{Generated: st.Generated, Users: users}
	if snap.Users == nil {
		snap.Users = []control.UserStatus{}
	}
	for _, u := range users {
		snap.Total += u.Throughput
	}
	return jsonout.EncodeLine(out, snap)
}
