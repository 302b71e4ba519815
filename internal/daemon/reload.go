package daemon

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/shaperd/shaperd/internal/fleet"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// reload rereads the configuration (with the fleet's shared plan in force,
// or the newest one refused when it loads now). Everything that can fail is done
// before the swap: loading and validating the files, evaluating the policy
// and building every interface's tree. A failure returns a *ConfigError and
// leaves the daemon (and the kernel) untouched. A reload that removes
// more users than daemon.max_reload_removals allows is refused the same
// way unless allowRemovals confirms it (shaperctl reload --allow-removals).
func (d *Daemon) reload(allowRemovals bool) error {
	var shared *fleet.Plan
	if d.fleet != nil {
		shared = d.fleet.shared
		// A fleet revision this router refused may load now that its own
		// file changed (e.g. an interface's default_tier fixed).
		if p := d.fleet.refusedPlan; p != nil {
			if _, err := loadPlan(d.opts.ConfigPath, sharedOf(p)); err == nil && d.reloadWith(p, allowRemovals) == nil {
				d.fleet.refused, d.fleet.errs, d.fleet.refusedPlan = 0, nil, nil
				d.fleet.refusedA.Store(0)
				d.log.Info("fleet: the shared plan refused before is applied with the reloaded file", "revision", p.Revision)
				d.saveFleetCache()
				d.fleetReport()
				return nil
			}
		}
	}
	return d.reloadWith(shared, allowRemovals)
}

// reloadWith is reload with the fleet's shared plan p (nil: the local
// file's own policy, tiers and users); on success p is the one in force.
// allowRemovals lets it remove more users than checkRemovals allows.
func (d *Daemon) reloadWith(p *fleet.Plan, allowRemovals bool) error {
	// RELOADING=1 with MONOTONIC_USEC is what Type=notify-reload
	// (systemd >= 253) expects; older versions ignore it.
	d.notify.Notify(fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", monotonicUsec()))
	defer d.notify.Notify("READY=1")
	plan, err := loadPlan(d.opts.ConfigPath, sharedOf(p))
	if err != nil {
		d.stats.reloads.WithLabelValues("refused").Inc()
		d.log.Error("reload refused: invalid configuration; the old one stays in force", "err", err)
		var ce *ConfigError
		if errors.As(err, &ce) {
			d.reloadResult(d.clock.Now(), ce.Problems)
		} else {
			d.reloadResult(d.clock.Now(), []string{err.Error()})
		}
		return err
	}
	file := plan
	d.resolveLeaves(file) // before the copy with the run-time users: both keep the kinds
	if err := d.checkClassifiers(file); err != nil {
		d.stats.reloads.WithLabelValues("refused").Inc()
		d.log.Error("reload refused; the old configuration stays in force", "err", err)
		d.reloadResult(d.clock.Now(), []string{err.Error()})
		return err
	}
	file, nodesKept, nodesChanged, err := d.reloadNodes(file)
	if err != nil {
		d.stats.reloads.WithLabelValues("refused").Inc()
		d.log.Error("reload refused: the run-time nodes do not fit the new configuration; the old one stays in force", "err", err)
		d.reloadResult(d.clock.Now(), err.(*ConfigError).Problems)
		return err
	}
	plan, kept, rtChanged, err := d.reloadRuntime(file)
	if err != nil {
		d.stats.reloads.WithLabelValues("refused").Inc()
		d.log.Error("reload refused: the run-time users do not fit the new configuration; the old one stays in force", "err", err)
		d.reloadResult(d.clock.Now(), err.(*ConfigError).Problems)
		return err
	}
	gone := d.removedUsers(plan)
	if !allowRemovals {
		if err := d.checkRemovals(plan, gone); err != nil {
			d.stats.reloads.WithLabelValues("refused").Inc()
			d.log.Error("reload refused: it would remove too many users; the old configuration stays in force", "err", err)
			d.reloadResult(d.clock.Now(), err.Problems)
			return err
		}
	}
	now := d.clock.Now()
	ifaces := d.makeReconcilers(plan, d.ifaces)
	ov := d.overrides.Clone()
	pruned := ov.Prune(plan)
	res := policy.Evaluate(plan, d.evalOverrides(ov), d.usage, now)
	targets := res.Targets() // validated unramped; the swap's policy step ramps
	trees := make([]model.Tree, len(ifaces))
	var problems []string
	for i, st := range ifaces {
		t, err := model.Build(targets[i], st.ids)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: interface %s: %v", st.cfg.Source, st.key, err))
			continue
		}
		trees[i] = t
	}
	if len(problems) > 0 {
		d.stats.reloads.WithLabelValues("refused").Inc()
		ce := &ConfigError{Problems: problems}
		d.log.Error("reload refused: the plan cannot be built; the old one stays in force", "err", ce)
		d.reloadResult(now, problems)
		return ce
	}
	// The diff against what is in force, for the log.
	old := map[string]*reconciler{}
	for _, st := range d.ifaces {
		old[st.key] = st
	}
	for i, st := range ifaces {
		n := len(trees[i].Classes) + len(trees[i].Filters)
		if o, ok := old[st.key]; ok && o.built() {
			n = len(model.Diff(*o.tree(), trees[i]))
			delete(old, st.key)
		}
		d.log.Info("reload: planned changes", "interface", st.key, "changes", n)
	}

	if a, b := d.plan.Daemon, plan.Daemon; a.Socket != b.Socket || a.SocketGroup != b.SocketGroup || a.AdminGroup != b.AdminGroup ||
		a.Metrics != b.Metrics || a.StateDir != b.StateDir {
		d.log.Warn("daemon.socket, socket_group, admin_group, metrics and state_dir take effect at the next start")
	}
	if !reflect.DeepEqual(d.plan.Fleet, plan.Fleet) {
		d.log.Warn("the [fleet] table takes effect at the next start")
	}
	// Swap.
	if d.fleet != nil && p != nil {
		d.fleet.shared = p
		d.fleet.revision.Store(p.Revision)
	}
	d.setPlan(plan)
	d.filePlan, d.runtime, d.rtNodes = file, kept, nodesKept
	if nodesChanged {
		d.saveNodes(plan.Daemon.StateDir, nodesKept)
	}
	if rtChanged {
		d.saveRuntimeUsers(plan.Daemon.StateDir, kept)
	}
	d.scheduleExpiry()
	d.setLogLevel(plan)
	d.ramper.SetPolicy(rampPolicy(plan.Policy))
	d.ifaces = ifaces
	if changed := d.usage.Configure(plan); len(changed) > 0 {
		d.log.Warn("quota_period changed: used bytes carry into the new period when the old one began inside it (e.g. day -> month), else the new period starts from zero (e.g. month -> day)",
			"users", describe(changed, 10))
	}
	if len(pruned) > 0 {
		for _, o := range pruned {
			d.log.Warn("dropping override of a target the new configuration no longer has", "target", o.Target.String())
		}
		d.overrides = ov
		d.saveOverrides(ov)
	} else {
		d.overrides = ov
	}
	for _, o := range old {
		d.teardown(o)
	}
	d.stats.reloads.WithLabelValues("ok").Inc()
	d.log.Info("configuration reloaded", "config", plan.Path, "interfaces", len(plan.Interfaces),
		"tiers", len(plan.Tiers), "users", len(plan.Users), "removed_users", len(gone))
	if len(gone) > 0 {
		d.log.Info("reload removed users", "count", len(gone), "users", describe(gone, 10), "confirmed", allowRemovals)
	}
	err = d.policyStep(now)
	d.saveAssignments()
	d.saveUsage(now)
	d.afterReconcile(err)
	d.reloadResult(now, nil)
	return nil
}

// teardown removes the shaping of an interface the plan no longer has.
func (d *Daemon) teardown(st *reconciler) {
	if err := d.k.Teardown(st.device, st.redirectFrom); err != nil {
		d.stats.errors.WithLabelValues("kernel").Inc()
		d.log.Error("cannot remove the shaping of an interface no longer configured", "interface", st.key, "err", err)
		return
	}
	d.log.Info("removed the shaping of an interface no longer configured", "interface", st.key)
}

// removedUsers names the users in force that next does not have, in the
// order of the plan in force.
func (d *Daemon) removedUsers(next *config.Plan) []string {
	keep := make(map[string]bool, len(next.Users))
	for i := range next.Users {
		keep[next.Users[i].Name] = true
	}
	var gone []string
	for i := range d.plan.Users {
		if !keep[d.plan.Users[i].Name] {
			gone = append(gone, d.plan.Users[i].Name)
		}
	}
	return gone
}

// checkRemovals refuses a reload to next that removes the users gone when
// they are more than daemon.max_reload_removals (the value in force, so
// that the file being reloaded cannot lift its own guard) allows, or every
// user: an emptied or truncated users file must not drop everyone into the
// default class. The error says how many would go and how to confirm.
func (d *Daemon) checkRemovals(next *config.Plan, gone []string) *ConfigError {
	n, limit := len(d.plan.Users), d.plan.Daemon.MaxReloadRemovals
	if !config.ReloadRemovalsRefused(n, len(gone), limit) {
		return nil
	}
	what := fmt.Sprintf("%d of the %d users in force", len(gone), n)
	if len(gone) == n {
		what = fmt.Sprintf("all %d users in force", n)
	}
	return &ConfigError{Problems: []string{fmt.Sprintf(
		"%s: reload refused: it would remove %s (%s), more than daemon.max_reload_removals = \"%d%%\" allows; "+
			"the old configuration stays in force. If that is meant, confirm with 'shaperctl reload --allow-removals'",
		next.UsersPath, what, describe(gone, 5), limit)}}
}
