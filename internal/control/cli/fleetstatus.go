package cli

import (
	"fmt"
	"io"

	"github.com/shaperd/shaperd/internal/control"
)

// writeFleet writes the fleet line of status (nothing without [fleet]):
// the link to etcd, the shared plan revision in force, and what was
// refused and why.
func writeFleet(out io.Writer, f *control.FleetStatus) {
	if f == nil {
		return
	}
	link := "connected"
	if !f.Connected {
		link = "DISCONNECTED (shaping with the last plan applied)"
	}
	plan := fmt.Sprintf("shared plan revision %d", f.Revision)
	if f.Revision == 0 {
		plan = "no shared plan yet (the local file's)"
	}
	fmt.Fprintf(out, "fleet: router %s, etcd %s, %s, %d fleet overrides\n", f.Router, link, plan, f.Overrides)
	if f.Refused != 0 {
		fmt.Fprintf(out, "fleet: refused revision %d; the old plan stays in force\n", f.Refused)
	}
	for _, e := range f.Errors {
		fmt.Fprintf(out, "fleet: %s\n", e)
	}
}
