package smoothness

import (
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Rates of the issue's cases.
const (
	High = 50 * tbf.Mbit
	Low  = 10 * tbf.Mbit
)

// DefaultTBFBurst is the TBF burst of the issue's cases: 256 KiB, large
// enough (42 ms at 50 Mbit, 210 ms at 10 Mbit) that the refill TBF grants on
// every change shows clearly in 100 ms windows.
const DefaultTBFBurst = 256 * tbf.Kibibyte

// IssueCases are the four changes of the policy issue: HTB down and up,
// TBF down and up (TBF with burst tbfBurst; 0: shaperd's default).
func IssueCases(tbfBurst tbf.Size) []Case {
	return []Case{
		{Shaper: model.ShaperHTB, From: High, To: Low},
		{Shaper: model.ShaperHTB, From: Low, To: High},
		{Shaper: model.ShaperTBF, From: High, To: Low, Burst: tbfBurst},
		{Shaper: model.ShaperTBF, From: Low, To: High, Burst: tbfBurst},
	}
}
