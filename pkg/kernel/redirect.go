package kernel

import (
	"fmt"

	"github.com/mdlayher/netlink"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// ingressQdisc is the handle of the ingress qdisc (ffff:).
const ingressQdisc = uint32(0xFFFF0000)

// redirectFilterMsg is the tcmsg of shaperd's redirect filter on ifi
// (handle 0: all filters at RedirectPref).
func redirectFilterMsg(ifi uint32) tcwire.Tcmsg {
	return tcwire.Tcmsg{Ifindex: ifi, Parent: ingressQdisc, Info: tcwire.FilterInfo(RedirectPref, tcwire.EthPAll)}
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
			func(at *tcwire.Attrs) error { at.String(tcwire.TCAKind, "ingress"); return nil },
			r.Interface, c.Op, "ingress qdisc ffff:", "ingress")
		if err != nil && !isErrno(err, errEEXIST) {
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
		left, err := a.k.dump(tcwire.RTMGetTFilter, tcwire.Tcmsg{Ifindex: ifi, Parent: ingressQdisc}, nil)
		if err != nil || len(left) > 0 {
			return nil // someone else's filters remain: keep their ingress qdisc
		}
		return a.ignoreGone(a.ignoreInval(a.write(tcwire.RTMDelQdisc, 0, tcwire.Tcmsg{Ifindex: ifi, Handle: ingressQdisc, Parent: uint32(model.HandleIngress)},
			nil, r.Interface, c.Op, "ingress qdisc ffff:", "ingress")))
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
