package kernel

import (
	"github.com/shaperd/shaperd/pkg/kernel/bpfcls"
	"github.com/shaperd/shaperd/pkg/kernel/u32"
	"github.com/shaperd/shaperd/pkg/model"
)

// FilterProblem is a filter the classifier cannot install: Index is its
// index in the list given to CheckFilters.
type FilterProblem = u32.Problem

// CheckFilters says, offline and without a kernel, which of one device's
// filters the classifier would refuse when they are applied (a prefix
// length it has no table for, a table bucket without room). A
// configuration check calls it so that such a filter is a --check error
// and not a refusal at apply time.
func CheckFilters(filters []model.Filter) []FilterProblem {
	return u32.CheckLayout(filters)
}

// CheckFiltersFor is CheckFilters for the classifier kind
// (ClassifierU32 or ClassifierBPF): the bpf classifier takes every prefix
// length and has no buckets to fill, so only prefixes no map key can
// hold (host bits set, IPv4-mapped, zoned) are problems.
func CheckFiltersFor(kind string, filters []model.Filter) []FilterProblem {
	if kind != ClassifierBPF {
		return CheckFilters(filters)
	}
	var out []FilterProblem
	for i, f := range filters {
		if err := bpfcls.CheckPrefix(f.Prefix); err != nil {
			out = append(out, FilterProblem{Index: i, Err: err})
		}
	}
	return out
}
