package daemon

import (
	"context"
	"errors"
	"fmt"
)

// Once applies the plan to every managed interface, verifies it and
// returns: nil when the kernel holds the plan everywhere, else an error
// naming each interface that failed (a missing interface wraps ErrMissing,
// a kernel refusal carries its *kernel.Error). It saves the class
// assignments and does not serve the control socket or metrics.
func (d *Daemon) Once(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.policyStep(d.clock.Now())
	d.saveAssignments()
	var errs []error
	for _, st := range d.ifaces {
		if st.buildErr != nil {
			errs = append(errs, fmt.Errorf("interface %s: %w", st.key, st.buildErr))
			continue
		}
		// The policy step applied every interface; check each once more,
		// which also reports those that failed or were missing.
		if err := d.reconcile(st, "once"); err != nil {
			errs = append(errs, err)
		}
	}
	d.saveUsage(d.clock.Now())
	return errors.Join(errs...)
}

// Teardown removes what shaperd installed on every managed interface of
// the plan (root qdiscs with their classes and filters, ingress redirects,
// IFB devices) and, when all of that worked, the interface lock files it
// created. Overrides stay in the state directory. Missing interfaces are
// not errors.
func (d *Daemon) Teardown(ctx context.Context) error {
	var errs []error
	for _, st := range d.ifaces {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := d.k.Teardown(st.device, st.redirectFrom); err != nil {
			errs = append(errs, fmt.Errorf("interface %s: %w", st.key, err))
			continue
		}
		d.log.Info("removed shaping", "interface", st.key, "device", st.device)
	}
	if len(errs) == 0 {
		// Nothing is left to manage: the interface lock files go too.
		if err := d.locks.Remove(); err != nil {
			d.log.Warn("teardown: lock files", "err", err)
		}
	}
	return errors.Join(errs...)
}
