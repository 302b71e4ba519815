package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/statefile"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// NodesFile holds the nodes added at run time (shaperctl node add), in
// daemon.state_dir. Nodes are few and change rarely: the file is written
// whole (atomically, synced) at each change.
const NodesFile = "nodes.json"

// runtimeNode is a node added at run time, as the state file holds it.
type runtimeNode struct {
	Name       string   `json:"name"`
	Parent     string   `json:"parent,omitempty"`
	Rate       tbf.Rate `json:"rate"`
	Ceil       tbf.Rate `json:"ceil,omitempty"`
	UploadRate tbf.Rate `json:"upload_rate,omitempty"`
	UploadCeil tbf.Rate `json:"upload_ceil,omitempty"`
	Interfaces []string `json:"interfaces,omitempty"`
}

// spec is n as config.Plan.WithNode takes it.
func (n *runtimeNode) spec() config.NodeSpec {
	return config.NodeSpec{Name: n.Name, Parent: n.Parent, Rate: n.Rate, Ceil: n.Ceil,
		UploadRate: n.UploadRate, UploadCeil: n.UploadCeil, Interfaces: n.Interfaces}
}

// nodesState is the state file's contents; the order is the order of
// addition, so every node comes after its parent.
type nodesState struct {
	Nodes []runtimeNode `json:"nodes"`
}

// withRuntimeNodes returns file's plan with the run-time nodes rt added,
// and the run-time nodes it kept. The file wins: a run-time node that the
// configuration now names is dropped (notes say so). A run-time node the
// plan cannot take (its parent gone, an interface no longer configured) is
// an error naming it.
func withRuntimeNodes(file *config.Plan, rt []runtimeNode) (*config.Plan, []runtimeNode, []string, error) {
	plan := file
	var kept []runtimeNode
	var notes []string
	for i := range rt {
		n := &rt[i]
		if m, ok := file.Node(n.Name); ok {
			notes = append(notes, fmt.Sprintf("node %s is in the configuration now (%s): the file wins, its run-time entry is dropped", n.Name, m.Source))
			continue
		}
		p, err := plan.WithNode(n.spec())
		if err != nil {
			return nil, nil, nil, fmt.Errorf("run-time node %s (shaperctl node list): %w", n.Name, err)
		}
		plan = p
		kept = append(kept, *n)
	}
	return plan, kept, notes, nil
}

// startNodes reads the run-time nodes from file's state_dir and returns
// file with them. A set of run-time nodes that the configuration no
// longer takes is left out (logged; the state file keeps them until the
// next node change), and so are the run-time users behind them then.
func (d *Daemon) startNodes(file *config.Plan) *config.Plan {
	d.rtNodes = nil
	dir := file.Daemon.StateDir
	d.readStateFile(dir, NodesFile, "no run-time nodes were restored (add them again with shaperctl node add; the moved file keeps them)",
		func(b []byte) error {
			var s nodesState
			if err := decodeState(b, &s); err != nil {
				return err
			}
			for i, n := range s.Nodes {
				if n.Name == "" || n.Rate == 0 {
					return fmt.Errorf("run-time node #%d: no name or rate", i)
				}
			}
			d.rtNodes = s.Nodes
			return nil
		})
	if len(d.rtNodes) == 0 {
		return file
	}
	plan, kept, notes, err := withRuntimeNodes(file, d.rtNodes)
	if err != nil {
		d.log.Error("run-time nodes do not fit the configuration; starting without them", "err", err)
		d.rtNodes = nil
		return file
	}
	for _, n := range notes {
		d.log.Warn("run-time nodes: " + n)
	}
	if len(kept) != len(d.rtNodes) && !d.opts.ReadOnly {
		d.saveNodes(dir, kept)
	}
	d.rtNodes = kept
	return plan
}

// reloadNodes is startNodes for a reloaded file plan: the file wins over
// run-time entries (logged), and a configuration that no longer takes the
// run-time nodes is refused, as an invalid file is.
func (d *Daemon) reloadNodes(file *config.Plan) (*config.Plan, []runtimeNode, bool, error) {
	if len(d.rtNodes) == 0 {
		return file, nil, false, nil
	}
	plan, kept, notes, err := withRuntimeNodes(file, d.rtNodes)
	if err != nil {
		return nil, nil, false, &ConfigError{Problems: []string{err.Error()}}
	}
	for _, n := range notes {
		d.log.Warn("run-time nodes: " + n)
	}
	return plan, kept, len(kept) != len(d.rtNodes), nil
}

// saveNodes writes the run-time nodes rt to the state file whole.
func (d *Daemon) saveNodes(dir string, rt []runtimeNode) error {
	if rt == nil {
		rt = []runtimeNode{}
	}
	err := statefile.SaveJSON(dir, NodesFile, nodesState{Nodes: rt})
	d.stateWritten(NodesFile, err)
	return err
}

// ChangeNode implements control.Service: it checks the change against the
// plan as a [nodes.NAME] table is checked, saves the run-time nodes and
// applies the change.
func (d *Daemon) ChangeNode(ctx context.Context, req control.NodeRequest) (*control.NodeResponse, error) {
	var resp *control.NodeResponse
	var err error
	if cerr := d.call(ctx, func() { resp, err = d.changeNode(req) }); cerr != nil {
		return nil, cerr
	}
	return resp, err
}

// Nodes implements control.Service: every node, parents first, with where
// it comes from.
func (d *Daemon) Nodes(ctx context.Context) (*control.NodeListResponse, error) {
	var resp *control.NodeListResponse
	if err := d.call(ctx, func() { resp = d.nodeList() }); err != nil {
		return nil, err
	}
	return resp, nil
}

func (d *Daemon) nodeList() *control.NodeListResponse {
	resp := &control.NodeListResponse{Nodes: make([]control.ListedNode, 0, len(d.plan.Nodes))}
	for i := range d.plan.Nodes {
		resp.Nodes = append(resp.Nodes, listedNode(&d.plan.Nodes[i]))
	}
	return resp
}

// listedNode is n as node list shows it.
func listedNode(n *config.Node) control.ListedNode {
	return control.ListedNode{Name: n.Name, Path: n.Path, Parent: n.Parent, Source: n.Source, Rate: n.Rate, Ceil: n.Ceil,
		UploadRate: n.UploadRate, UploadCeil: n.UploadCeil, Interfaces: slices.Clone(n.Interfaces)}
}

// changeNode checks and applies one run-time node change. The plan's
// nodes are replaced (users stay as they are), the state file written
// first, and then only the node's class changes in the kernel when
// nothing else moves (policy.Result.AddNode, RemoveNode); otherwise a full
// policy step brings the rest along. Nothing changes when it is refused.
func (d *Daemon) changeNode(req control.NodeRequest) (*control.NodeResponse, error) {
	now := d.clock.Now()
	var base, plan *config.Plan
	var next []runtimeNode
	var err error
	switch req.Op {
	case control.NodeAdd:
		n := runtimeNode{Name: req.Name, Parent: req.Parent, Interfaces: req.Interfaces}
		for _, v := range []struct {
			dst *tbf.Rate
			src *tbf.Rate
		}{{&n.Rate, req.Rate}, {&n.Ceil, req.Ceil}, {&n.UploadRate, req.UploadRate}, {&n.UploadCeil, req.UploadCeil}} {
			if v.src != nil {
				*v.dst = *v.src
			}
		}
		if p, ok := d.plan.Node(n.Parent); ok {
			n.Parent = p.Name // kept by name: a path is checked once, here
		}
		if plan, err = d.plan.WithNode(n.spec()); err != nil {
			return nil, control.BadRequest("%v", err)
		}
		if limit := policy.MaxUsers(d.plan); len(d.plan.Users)+len(plan.Nodes) > limit {
			return nil, control.BadRequest("node %s: %d users and %d nodes: an interface holds at most %d user and node classes",
				n.Name, len(d.plan.Users), len(plan.Nodes), limit)
		}
		if err := nodeBelowBandwidth(plan, n.Name); err != nil {
			return nil, err
		}
		if base, err = d.filePlan.WithNode(n.spec()); err != nil {
			return nil, control.BadRequest("%v", err)
		}
		next = append(slices.Clone(d.rtNodes), n)
	case control.NodeRemove:
		n, ok := d.plan.Node(req.Name)
		if !ok {
			return nil, &control.NotFoundError{Target: "node:" + req.Name}
		}
		if n.Source != config.RuntimeSource {
			return nil, control.BadRequest("node %s is written in the configuration (%s): remove it there and reload", n.Name, n.Source)
		}
		name := n.Name
		if plan, err = d.plan.WithoutNode(name); err != nil {
			return nil, control.BadRequest("%v", err)
		}
		if base, err = d.filePlan.WithoutNode(name); err != nil {
			return nil, control.BadRequest("%v", err)
		}
		next = slices.DeleteFunc(slices.Clone(d.rtNodes), func(m runtimeNode) bool { return m.Name == name })
		req.Name = name
	}
	if err := d.saveNodes(d.plan.Daemon.StateDir, next); err != nil {
		return nil, fmt.Errorf("run-time nodes not changed: %w", err)
	}
	d.rtNodes, d.filePlan = next, base
	d.plan = plan
	d.prefixesOf = plan // the users and their addresses are the same
	start := d.clock.Now()
	patched, err := d.patchNode(req.Op, req.Name, now)
	d.log.Info("run-time nodes changed", "op", req.Op, "node", req.Name, "runtime_nodes", len(d.rtNodes),
		"patched", patched, "took", d.clock.Now().Sub(start))
	if err != nil {
		d.log.Error("applying a run-time node change", "node", req.Name, "err", err)
	}
	resp := &control.NodeResponse{Op: req.Op, Name: req.Name}
	if n, ok := d.plan.Node(req.Name); ok {
		ln := listedNode(n)
		resp.Node = &ln
		if x := d.nodeCapNote(n.Name); x != "" {
			resp.Note = x
		}
	}
	return resp, nil
}

// nodeBelowBandwidth refuses a node whose rate or ceil no interface it is
// on can carry on downloads (likely a typo: 1gbps, bytes, for 1gbit), as
// a run-time user's own rates are refused.
func nodeBelowBandwidth(plan *config.Plan, name string) error {
	n, _ := plan.Node(name)
	var bw tbf.Rate
	for _, in := range plan.Interfaces {
		if in.Shaper == config.ShaperHTB && in.Direction == config.Egress && n.On(in.Name) {
			bw = max(bw, in.Bandwidth)
		}
	}
	if bw != 0 && n.Rate > bw {
		return control.BadRequest("node %s: rate %s is above the bandwidth %s of every interface it is on (egress)", name, n.Rate, bw)
	}
	return nil
}

// nodeCapNote says when node's class got less than it asked for (its ceil
// capped to its parent's), from the last evaluation.
func (d *Daemon) nodeCapNote(node string) string {
	if d.lastRes == nil {
		return ""
	}
	for i := range d.lastRes.Interfaces {
		if x, ok := d.lastRes.Interfaces[i].NodeOf(node); ok && x.CeilCapped {
			return fmt.Sprintf("on %s (%s): %s", x.Interface, x.Direction, x.Reason)
		}
	}
	return ""
}

// patchNode brings the node change op of node to the kernel: the node's
// class alone (added or removed with model.Desired.PutNode, RemoveNode)
// when policy.Result.AddNode or RemoveNode says nothing else changes,
// else a full policy step. patched reports which.
func (d *Daemon) patchNode(op, node string, now time.Time) (patched bool, err error) {
	current := d.lastRes != nil
	for _, st := range d.ifaces {
		current = current && st.current()
	}
	switch {
	case !current:
	case op == control.NodeAdd && d.lastRes.AddNode(d.plan, d.evalOverrides(d.overrides), now, node):
		patched = true
	case op == control.NodeRemove && d.lastRes.RemoveNode(node):
		patched = true
	}
	if !patched {
		d.policyDirty = true
		return false, d.policyStep(now)
	}
	d.work.userSteps++
	var errs []error
	for i, st := range d.ifaces {
		key := policy.RampKey{Interface: st.cfg.Name, Direction: model.Direction(st.cfg.Direction), Kind: policy.ClassNode, Name: node}
		var step model.Step
		var err error
		if op == control.NodeRemove {
			d.ramper.Forget(key)
			step, err = st.desired().RemoveNode(node)
		} else {
			ir := &d.lastRes.Interfaces[i]
			j := slices.IndexFunc(ir.Targets.Nodes, func(t model.NodeTarget) bool { return t.Name == node })
			if j < 0 {
				continue
			}
			step, err = st.desired().PutNode(ir.Targets.Nodes[j])
		}
		if err := d.applyStep(st, "node "+op, step, err); err != nil {
			errs = append(errs, err)
		}
	}
	d.publish()
	return true, errors.Join(errs...)
}
