package model

import "fmt"

// Op is what a Change does to a kernel object.
type Op int

// Ops.
const (
	OpAdd    Op = iota // create the object
	OpChange           // modify the existing object in place (HTB keeps its tokens)
	OpDelete           // remove the object
)

func (o Op) String() string {
	switch o {
	case OpAdd:
		return "add"
	case OpChange:
		return "change"
	case OpDelete:
		return "delete"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Change is one kernel write on Device. Exactly one of Redirect, Qdisc,
// Class or Filter is set. A class's leaf qdisc travels with its Class: an
// OpChange whose Leaf differs from From.Leaf replaces the leaf qdisc.
type Change struct {
	Op     Op
	Device string

	Redirect *Redirect
	Qdisc    *Qdisc
	Class    *Class
	Filter   *Filter
	// From is, for OpChange, the actual object being changed (the same kind
	// as the one set above), so appliers and explanations can see what differs.
	FromQdisc *Qdisc
	FromClass *Class
}
