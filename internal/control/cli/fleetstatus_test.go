package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control"
)

// TestStatusShowsFleet: the fleet line says the link is down, the
// revision in force and a refused one with why; none without [fleet].
func TestStatusShowsFleet(t *testing.T) {
	st := &control.Status{Generated: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
		Fleet: &control.FleetStatus{Router: "r1", Revision: 41, Refused: 42, Overrides: 2,
			Errors: []string{"fleet rev 42: shared.toml:9:1: tiers.gold.ceil: 1mbit is below rate 30mbit"}}}
	var b strings.Builder
	if err := writeStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"fleet: router r1, etcd DISCONNECTED (shaping with the last plan applied), shared plan revision 41, 2 fleet overrides",
		"fleet: refused revision 42; the old plan stays in force",
		"fleet: fleet rev 42: shared.toml:9:1: tiers.gold.ceil",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
	b.Reset()
	st.Fleet = nil
	if err := writeStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "fleet") {
		t.Errorf("a fleet line without [fleet]:\n%s", b.String())
	}
}
