package daemon

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
)

// ErrDegraded is wrapped by reconcile errors of an interface whose plan
// the kernel holds except for refused objects (reconciler.refused): every
// other user is shaped.
var ErrDegraded = errors.New("the kernel refused some objects")

// maxLoggedRefusals caps the refusals logged one by one per apply.
const maxLoggedRefusals = 20

// refusedSummary is the interface's error while it is degraded: how many
// objects were refused and skipped, and the first refusals.
func refusedSummary(rs []*kernel.Error) string {
	var refused, skipped []string
	for _, r := range rs {
		if errors.Is(r, kernel.ErrDependencyRefused) {
			skipped = append(skipped, r.Object)
		} else {
			refused = append(refused, r.Error())
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the kernel refused %d object(s)", len(refused))
	if len(skipped) > 0 {
		fmt.Fprintf(&b, " and %d more were not applied because of that", len(skipped))
	}
	b.WriteString("; the rest is shaped: ")
	for i, r := range refused {
		if i == 3 {
			fmt.Fprintf(&b, "; ... (%d more, see the users' errors)", len(refused)-3)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r)
	}
	return b.String()
}

// userErrors maps each user with a refused (or skipped) object on st to
// what that means for them: "not shaped: ..." for an object that was to be
// added, "old settings still in force: ..." for a refused change.
func userErrors(st *reconciler) map[string]string {
	if len(st.refused) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, r := range st.refused {
		u := r.Labels.User
		if u == "" || out[u] != "" {
			continue
		}
		switch r.Op {
		case model.OpChange:
			out[u] = "old settings still in force: " + r.Error()
		default:
			out[u] = "not shaped as planned: " + r.Error()
		}
	}
	return out
}

// noteRefusals records the refusals of an apply on st: counted in
// shaperd_errors_total{kind="kernel"} (one per refused object), logged by
// name (user, tier, object, the kernel's text) when they differ from the
// last apply's, and kept for status. It returns an error wrapping
// ErrDegraded, or a plain failure when what was refused leaves the
// interface unshaped (its root qdisc, or its u32 tables).
func (d *Daemon) noteRefusals(st *reconciler, why string, rs []*kernel.Error) error {
	same := len(rs) == len(st.refused)
	for i := 0; same && i < len(rs); i++ {
		same = rs[i].Error() == st.refused[i].Error()
	}
	st.refused = rs
	var fatal error
	for i, r := range rs {
		skipped := errors.Is(r, kernel.ErrDependencyRefused)
		if !skipped {
			d.stats.errors.WithLabelValues("kernel").Inc()
		}
		if fatal == nil && !skipped && (strings.HasPrefix(r.Object, "root qdisc") || r.Object == "u32 hash tables") {
			fatal = r
		}
		if same || i >= maxLoggedRefusals {
			continue
		}
		d.log.Error("kernel refused an object; the others are applied", "interface", st.key, "why", why,
			"user", r.Labels.User, "tier", r.Labels.Tier, "op", r.Op.String(), "object", r.Object, "skipped", skipped, "err", r)
	}
	if !same && len(rs) > maxLoggedRefusals {
		d.log.Error("kernel refused more objects", "interface", st.key, "more", len(rs)-maxLoggedRefusals)
	}
	if old := oldObjects(rs); len(old) > 0 && !same {
		d.log.Warn("the kernel keeps the old settings of these objects", "interface", st.key, "objects", strings.Join(old, ", "))
	}
	if fatal != nil {
		return fmt.Errorf("interface %s: %w", st.key, fatal)
	}
	return fmt.Errorf("interface %s: %w: %s", st.key, ErrDegraded, refusedSummary(rs))
}

// oldObjects names the objects whose change the kernel refused: they
// keep their old settings (a reload the kernel partly refused).
func oldObjects(rs []*kernel.Error) []string {
	var out []string
	for _, r := range rs {
		if r.Op == model.OpChange && !slices.Contains(out, r.Object) {
			out = append(out, r.Object)
		}
	}
	return out
}

// recovered turns a panic while reconciling st into an error: logged
// with its stack, counted as shaperd_errors_total{kind="panic"}; the
// caller marks the interface failed and the other interfaces go on.
func (d *Daemon) recovered(st *reconciler, r any) error {
	d.stats.errors.WithLabelValues("panic").Inc()
	err := fmt.Errorf("interface %s: internal error (panic): %v", st.key, r)
	d.log.Error("recovered from a panic while reconciling an interface; the other interfaces go on",
		"interface", st.key, "err", err, "stack", string(debug.Stack()))
	return err
}

// safeDump is d.k.Dump of st's device for the start (class ids, ramp
// seeds): a panic while reading the kernel is logged, counted and
// returned as an error, so that the daemon still starts.
func (d *Daemon) safeDump(st *reconciler) (t model.Tree, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = d.recovered(st, r)
		}
	}()
	return d.k.Dump(st.device)
}
