// Package check is `shaperd --check`: it loads a configuration (a fleet
// router's with the fleet's shared plan), checks it offline
// (internal/check/offline) and against this machine's kernel and devices
// (transmit queues, the classifiers and leaf qdisc kinds the kernel has),
// and returns one Report with every error and note. It also holds what
// the daemon decides the same way: the classifier choice
// (ChooseClassifier), the link measurement (MeasureLinks), and the report
// of what applying a plan would change (PlanDiff, WritePlanDiff) for
// `shaperd --check --diff` and `shaperctl reload --dry-run`.
package check

import (
	"time"

	"github.com/shaperd/shaperd/pkg/config"
)

// Options tune Run.
type Options struct {
	// Now is when the policy is evaluated for the notes on oversubscribed
	// guarantees; zero is time.Now().
	Now time.Time
}

// Report is what `shaperd --check` found in a configuration.
type Report struct {
	// Path is the configuration file checked.
	Path string
	// Plan is the plan checked: the file with the fleet's shared part when
	// a router has one; nil when the files do not load.
	Plan *config.Plan
	// FleetNote says which shared plan a fleet router's file was checked
	// with, or why none; "" without [fleet].
	FleetNote string
	// Errors are the configuration's problems, each at its key's position:
	// what loading and the offline check refuse (sorted), or, when they
	// pass, what the devices refuse (transmit queues, XPS maps).
	Errors []config.Error
	// ClassifierErr is a configured classifier this kernel refuses, looked
	// at only when there are no Errors.
	ClassifierErr error

	// The notes of a valid configuration (OK), none of them an error.

	// KeyNotes are at keys: the loader's (a rate written in bytes per
	// second), then each ceil above an HTB interface's bandwidth (capped
	// to it) and each guaranteed rate above it (scaled with the others).
	KeyNotes []config.Error
	// Notes are about the plan as written, now: each interface and tier
	// aggregate whose guaranteed rates add up to more than its bandwidth,
	// then each leaf qdisc kind this kernel lacks (and the default) with
	// the bfifo that replaces it.
	Notes []string
	// ClassifierNotes name each HTB interface's classifier on this
	// kernel and why.
	ClassifierNotes []string
}

// OK reports whether the configuration is valid: no Errors and no
// ClassifierErr.
func (r *Report) OK() bool { return len(r.Errors) == 0 && r.ClassifierErr == nil }

// Run checks the configuration at path as `shaperd --check` does: it
// loads it (with the fleet's shared plan when it has [fleet]: the current
// one in etcd, else the one cached in state_dir), checks the plan offline
// (offline.Plan), then the devices' transmit queues, then the classifiers
// on this kernel, and, for a valid configuration, gathers the notes. Each
// step runs only when the ones before found no error, so a Report has
// either errors or notes.
func Run(path string, opts Options) Report {
	r := Report{Path: path}
	r.Plan, r.Errors, r.FleetNote = routerPlan(path)
	if r.Plan != nil && len(r.Errors) == 0 {
		r.Errors = checkQueues(r.Plan)
	}
	if len(r.Errors) > 0 {
		return r
	}
	r.ClassifierNotes, r.ClassifierErr = checkClassifiers(r.Plan)
	if r.ClassifierErr != nil {
		return r
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	// The key notes first: the plan notes measure the links and probe the
	// leaf kinds into the plan.
	r.KeyNotes = keyNotes(r.Plan)
	r.Notes = planNotes(r.Plan, now)
	return r
}
