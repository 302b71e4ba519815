package cli

import (
	"io"
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

// writeTopJSON writes one snapshot as a line of JSON: the users in top's
// order.
func writeTopJSON(out io.Writer, st *control.Status, order func(a, b control.UserStatus) int) error {
	users := sortTop(st, order)
	snap := topSnapshot{Generated: st.Generated, Users: users}
	if snap.Users == nil {
		snap.Users = []control.UserStatus{}
	}
	for _, u := range users {
		snap.Total += u.Throughput
	}
	return jsonout.EncodeLine(out, snap)
}
