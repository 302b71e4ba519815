// Package filtercheck says, offline and without a kernel, which of one
// device's filters each classifier would refuse when they are applied.
// It loads no eBPF and opens no socket, so programs that only check a
// configuration (shaperctl) can use it without linking the kernel code.
package filtercheck

import (
	"fmt"
	"net/netip"

	"github.com/shaperd/shaperd/pkg/kernel/u32"
	"github.com/shaperd/shaperd/pkg/model"
)

// Classifier kinds (kernel.Kernel.SetClassifier).
const (
	ClassifierU32 = "u32"
	ClassifierBPF = "bpf"
)

// Problem is a filter the classifier cannot install: Index is its index
// in the list given to Filters.
type Problem = u32.Problem

// Filters says which of filters the classifier kind (ClassifierU32 or
// ClassifierBPF) would refuse. The u32 classifier refuses prefix lengths
// it has no table for and more prefixes in a table bucket than it has
// node ids (u32.CheckLayout); the bpf classifier takes every prefix length
// and has no buckets to fill, so only prefixes no map key can hold
// (BPFPrefix) are problems. A configuration check calls it so that such a
// filter is a --check error and not a refusal at apply time.
func Filters(kind string, filters []model.Filter) []Problem {
	if kind != ClassifierBPF {
		return u32.CheckLayout(filters)
	}
	var out []Problem
	for i, f := range filters {
		if err := BPFPrefix(f.Prefix); err != nil {
			out = append(out, Problem{Index: i, Err: err})
		}
	}
	return out
}

// BPFPrefix reports whether the bpf classifier's LPM-trie maps can hold
// prefix p (any length): an invalid, zoned or IPv4-mapped IPv6 prefix, or
// one with host bits set, is an error saying which.
func BPFPrefix(p netip.Prefix) error {
	if !p.IsValid() {
		return fmt.Errorf("invalid prefix %v", p)
	}
	a := p.Addr()
	if a.Zone() != "" {
		return fmt.Errorf("prefix %v has a zone", p)
	}
	if a.Is4In6() {
		return fmt.Errorf("prefix %v is IPv4-mapped IPv6: write it as IPv4", p)
	}
	if p.Masked() != p {
		return fmt.Errorf("prefix %v has host bits set (did you mean %v?)", p, p.Masked())
	}
	return nil
}
