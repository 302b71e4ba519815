package model

import "github.com/shaperd/shaperd/pkg/tbf"

// Nodes too big for one queue. Per-queue trees (InterfaceSpec.Queues > 1)
// place a top-level node and everything under it on one queue, as one
// unit, so that its classes share one HTB qdisc. A node whose ceil is more
// than one queue's even share of the bandwidth (Bandwidth/Queues) would,
// saturated, need more than one queue (one CPU's worth of the interface):
// it is split as tiers are instead. It gets a class in every queue's tree
// (under its parent's class in that queue: a node that big has a parent at
// least as big, since ceilings are capped to the parent's, so its parent
// is split too), with a share of its rate and ceil that the policy loop
// moves to where its traffic is (Targets.NodeQueues, RebalanceMQ), so that
// together they never pass its ceil; its own users are placed on queues one
// by one, as users without a node are; and each node under it that fits
// one queue is placed with everything under that one as a unit of its own,
// under the split node's class in that queue.

// SplitNodes returns the nodes of nodes (parents listed before their
// children) that spec's per-queue trees split over every queue: those
// bigger than a queue's share (tooBig) whose parent is split too, or who
// are top-level. Nil for a single tree.
func SplitNodes(spec InterfaceSpec, nodes []NodeTarget) map[string]bool {
	if spec.Queues < 2 {
		return nil
	}
	var split map[string]bool
	for _, n := range nodes {
		if tooBig(spec, n) && (n.Parent == "" || split[n.Parent]) {
			if split == nil {
				split = map[string]bool{}
			}
			split[n.Name] = true
		}
	}
	return split
}

// tooBig reports whether node n's ceil (or rate) is more than one queue's
// even share of spec's bandwidth, under per-queue trees.
func tooBig(spec InterfaceSpec, n NodeTarget) bool {
	return spec.Queues > 1 && max(n.Rate, n.Ceil) > spec.Bandwidth/tbf.Rate(spec.Queues)
}

// splitChain reports whether the last node of chain (a node and its
// ancestors, top-level first) is split: every node of it is too big.
func splitChain(spec InterfaceSpec, chain []NodeTarget) bool {
	if len(chain) == 0 {
		return false
	}
	for _, n := range chain {
		if !tooBig(spec, n) {
			return false
		}
	}
	return true
}

// placementUnits maps each node of nodes (parents listed first) to the
// node it is placed on a queue with: itself when its parent is split or
// it is a top-level node that is not, its parent's unit otherwise, and ""
// for a split node (which is in every queue).
func placementUnits(nodes []NodeTarget, split map[string]bool) map[string]string {
	unit := make(map[string]string, len(nodes))
	for _, n := range nodes {
		switch {
		case split[n.Name]:
			unit[n.Name] = ""
		case n.Parent == "" || split[n.Parent]:
			unit[n.Name] = n.Name
		default:
			unit[n.Name] = unit[n.Parent]
		}
	}
	return unit
}
