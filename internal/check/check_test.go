package check

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/pkg/config"
)

// Run of a valid configuration has no errors and the notes: a key note
// where a ceil is capped, one classifier note per HTB interface.
func TestRunValid(t *testing.T) {
	p := writeConfig(t, t.TempDir(), capsConfig, testUsers)
	r := Run(p, Options{Now: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)})
	if !r.OK() || r.Path != p || r.Plan == nil || r.FleetNote != "" {
		t.Fatalf("report %+v; want a valid plan", r)
	}
	if !slices.ContainsFunc(r.KeyNotes, func(e config.Error) bool { return strings.Contains(e.Msg, "capped to 50mbit") }) {
		t.Errorf("key notes %v; want gold's ceil capped to 50mbit", r.KeyNotes)
	}
	if len(r.ClassifierNotes) != 2 || !strings.HasPrefix(r.ClassifierNotes[0], "interface lan0 (egress): classifier ") {
		t.Errorf("classifier notes %q; want one per interface", r.ClassifierNotes)
	}
}

// Run of a configuration with errors reports them and gathers no notes.
func TestRunErrors(t *testing.T) {
	users := strings.Replace(testUsers, `"198.18.1.20"`, `"2001:db8:2::/96"`, 1) // no u32 table for /96
	p := writeConfig(t, t.TempDir(), capsConfig, users)
	r := Run(p, Options{})
	if r.OK() || len(r.Errors) != 1 || !strings.Contains(r.Errors[0].Key, "addresses[0]") {
		t.Fatalf("errors %v; want the /96", r.Errors)
	}
	if r.KeyNotes != nil || r.Notes != nil || r.ClassifierNotes != nil {
		t.Errorf("notes with errors: %+v", r)
	}
}
