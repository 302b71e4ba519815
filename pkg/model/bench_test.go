package model_test

import (
	"testing"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

const benchUsers = 10000

func benchTargets() model.Targets {
	return model.Targets{
		Interface: egressSpec(),
		Tiers:     []model.TierTarget{{Name: "gold", Rate: 300 * tbf.Mbit, Ceil: 600 * tbf.Mbit}},
		Users:     manyUsers(benchUsers),
	}
}

// BenchmarkBuild10k builds a 10,000-user HTB tree with a stable assignment.
func BenchmarkBuild10k(b *testing.B) {
	tg := benchTargets()
	ids := model.NewAssignment()
	mustBuild(b, tg, ids)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := model.Build(tg, ids); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiff10kEqual diffs two equal 10,000-user trees (the common
// reconcile case).
func BenchmarkDiff10kEqual(b *testing.B) {
	ids := model.NewAssignment()
	a := mustBuild(b, benchTargets(), ids)
	w := mustBuild(b, benchTargets(), ids)
	b.ReportAllocs()
	for b.Loop() {
		if cs := model.Diff(a, w); len(cs) != 0 {
			b.Fatalf("%d changes", len(cs))
		}
	}
}

// BenchmarkDiff10kAllRatesChanged diffs 10,000-user trees in which every
// user's rate differs (a global retune): 10,000 OpChanges.
func BenchmarkDiff10kAllRatesChanged(b *testing.B) {
	ids := model.NewAssignment()
	a := mustBuild(b, benchTargets(), ids)
	tg := benchTargets()
	for i := range tg.Users {
		tg.Users[i].Rate += tbf.Mbit
		tg.Users[i].Ceil += tbf.Mbit
	}
	w := mustBuild(b, tg, ids)
	b.ReportAllocs()
	for b.Loop() {
		if cs := model.Diff(a, w); len(cs) != benchUsers {
			b.Fatalf("%d changes, want %d", len(cs), benchUsers)
		}
	}
}

// BenchmarkDiff10kFromNothing diffs an empty device against 10,000 users.
func BenchmarkDiff10kFromNothing(b *testing.B) {
	w := mustBuild(b, benchTargets(), nil)
	b.ReportAllocs()
	for b.Loop() {
		if cs := model.Diff(model.Tree{Device: w.Device}, w); len(cs) == 0 {
			b.Fatal("no changes")
		}
	}
}
