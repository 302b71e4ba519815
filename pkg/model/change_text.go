package model

import "fmt"

// describeChange is "add class 1:105 on lan0" and the like.
func describeChange(c Change) string {
	switch {
	case c.Redirect != nil:
		return fmt.Sprintf("%s redirect %s -> %s", c.Op, c.Redirect.Interface, c.Redirect.IFB)
	case c.Qdisc != nil:
		return fmt.Sprintf("%s qdisc %s %s on %s", c.Op, c.Qdisc.Kind, c.Qdisc.Handle, c.Device)
	case c.Class != nil:
		return fmt.Sprintf("%s class %s%s on %s", c.Op, c.Class.Handle, labelText(c.Class.Labels), c.Device)
	case c.Filter != nil:
		return fmt.Sprintf("%s filter %s %s -> %s on %s", c.Op, c.Filter.Prefix, c.Filter.Match, c.Filter.ClassID, c.Device)
	}
	return c.Op.String() + " nothing"
}

// String describes the change, e.g. "change class 1:105 (user alice) on lan0".
func (c Change) String() string { return describeChange(c) }
