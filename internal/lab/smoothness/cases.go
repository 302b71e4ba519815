package smoothness

import (
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Rates of the four reference changes (RequirementCases).
const (
	High = 50 * tbf.Mbit
	Low  = 10 * tbf.Mbit
)

// DefaultTBFBurst is the TBF burst of the reference changes: 256 KiB, large
// enough (42 ms at 50 Mbit, 210 ms at 10 Mbit) that the refill TBF grants on
// every change shows clearly in 100 ms windows.
const DefaultTBFBurst = 256 * tbf.Kibibyte

// RequirementCases are the four changes a smooth rate change is held to
// (50 to 10 Mbit/s and back, on an HTB user class and on a TBF root; the
// targets are in verdict.go): HTB down and up, TBF down and up (TBF with
// burst tbfBurst; 0: shaperd's default).
func RequirementCases(tbfBurst tbf.Size) []Case {
	return []Case{
		{Shaper: model.ShaperHTB, From: High, To: Low},
		{Shaper: model.ShaperHTB, From: Low, To: High},
		{Shaper: model.ShaperTBF, From: High, To: Low, Burst: tbfBurst},
		{Shaper: model.ShaperTBF, From: Low, To: High, Burst: tbfBurst},
	}
}
