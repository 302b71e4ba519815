package kernel

import (
	"fmt"

	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// The redirect to an IFB sits at the device's ingress hook. shaperd gives
// the device a clsact qdisc for it (handle ffff:), which has an ingress and
// an egress hook: per-queue trees steer at the egress hook of the same
// qdisc, and a device holds either an ingress or a clsact qdisc, never
// both. An ingress qdisc already there (made by an older shaperd or by
// hand) serves as well: filters at parent ffff:fff2 reach the ingress hook
// of either kind.
const (
	ingressQdisc = uint32(0xFFFF0000) // the handle of the ingress or clsact qdisc
	ingressHook  = uint32(0xFFFFFFF2) // its ingress hook (TC_H_MIN_INGRESS)
	egressHook   = uint32(0xFFFFFFF3) // clsact's egress hook (TC_H_MIN_EGRESS)
)

// redirectFilterMsg is the tcmsg of shaperd's redirect filter on ifi
// (handle 0: all filters at RedirectPref).
func redirectFilterMsg(ifi uint32) tcwire.Tcmsg {
	return tcwire.Tcmsg{Ifindex: ifi, Parent: ingressHook, Info: tcwire.FilterInfo(RedirectPref, tcwire.EthPAll)}
}

func redirectObject(r *model.Redirect) string {
	return fmt.Sprintf("ingress redirect %s -> %s", r.Interface, r.IFB)
}

func (a *applier) redirect(c *model.Change) error {
	r := c.Redirect
	switch c.Op {
	case model.OpAdd:
		if err := a.k.ensureIFB(r.IFB, r.Queues); err != nil {
			return fmt.Errorf("%s: %w", redirectObject(r), err)
		}
		ifi, err := a.ifindex(r.Interface)
		if err != nil {
			return fmt.Errorf("%s: %w", redirectObject(r), err)
		}
		ifb, err := a.ifindex(r.IFB)
		if err != nil {
			return fmt.Errorf("%s: %w", redirectObject(r), err)
		}
		err = a.write(tcwire.RTMNewQdisc, netlink.Create|netlink.Excl, tcwire.Tcmsg{Ifindex: ifi, Handle: ingressQdisc, Parent: uint32(model.HandleIngress)},
			func(at *tcwire.Attrs) error { at.String(tcwire.TCAKind, "clsact"); return nil },
			r.Interface, c.Op, "clsact qdisc ffff:", "clsact")
		// EEXIST: a clsact is there; EINVAL: an ingress qdisc (another
		// kind at ffff:), whose ingress hook serves as well.
		if err != nil && !isErrno(err, errEEXIST) && !isErrno(err, errEINVAL) {
			return err
		}
		m := redirectFilterMsg(ifi)
		if err := a.ignoreGone(a.ignoreInval(a.write(tcwire.RTMDelTFilter, 0, m, nil, r.Interface, model.OpDelete, redirectObject(r), "u32"))); err != nil {
			return err
		}
		return a.write(tcwire.RTMNewTFilter, netlink.Create|netlink.Excl, m, func(at *tcwire.Attrs) error { encodeRedirectFilter(at, ifb); return nil },
			r.Interface, c.Op, redirectObject(r), "u32")
	case model.OpDelete:
		ifi, err := a.ifindex(r.Interface)
		if err != nil {
			return fmt.Errorf("%s: %w", redirectObject(r), err)
		}
		m := redirectFilterMsg(ifi)
		if err := a.ignoreGone(a.ignoreInval(a.write(tcwire.RTMDelTFilter, 0, m, nil, r.Interface, c.Op, redirectObject(r), "u32"))); err != nil {
			return err
		}
		for _, hook := range []uint32{ingressHook, egressHook} {
			left, err := a.k.dump(tcwire.RTMGetTFilter, tcwire.Tcmsg{Ifindex: ifi, Parent: hook}, nil)
			if (err != nil && !isErrno(err, errEINVAL)) || len(left) > 0 {
				return nil // someone else's filters (or steering) remain: keep the qdisc
			}
		}
		return a.ignoreGone(a.ignoreInval(a.write(tcwire.RTMDelQdisc, 0, tcwire.Tcmsg{Ifindex: ifi, Handle: ingressQdisc, Parent: uint32(model.HandleIngress)},
			nil, r.Interface, c.Op, "ingress qdisc ffff:", "clsact")))
	}
	return fmt.Errorf("%s: unsupported op %s (redirects are added or deleted)", redirectObject(r), c.Op)
}

// ignoreInval treats EINVAL as "nothing there" (the kernel answers a delete
// on a missing ingress qdisc or filter chain with EINVAL on some paths).
func (a *applier) ignoreInval(err error) error {
	if err != nil && isErrno(err, errEINVAL) {
		return nil
	}
	return err
}
