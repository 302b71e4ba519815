package kernel

import (
	"github.com/shaperd/shaperd/pkg/kernel/filtercheck"
	"github.com/shaperd/shaperd/pkg/kernel/u32"
	"github.com/shaperd/shaperd/pkg/model"
)

// FilterProblem is a filter the classifier cannot install: Index is its
// index in the list given to CheckFilters.
type FilterProblem = filtercheck.Problem

// CheckFilters says, offline and without a kernel, which of one device's
// filters the classifier would refuse when they are applied (a prefix
// length it has no table for, a table bucket without room). A
// configuration check calls it so that such a filter is a --check error
// and not a refusal at apply time. filtercheck.Filters checks for either
// classifier.
func CheckFilters(filters []model.Filter) []FilterProblem {
	return u32.CheckLayout(filters)
}
