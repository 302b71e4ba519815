package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// NodeSpec is a node added at run time (shaperctl node add): what an
// operator gives, before WithNode checks it and fills in the rest.
type NodeSpec struct {
	Name string
	// Parent is the node it is behind (a name or a path); "": top level.
	Parent string
	// Rate is required; Ceil defaults to Rate, UploadRate to Rate and
	// UploadCeil to the larger of Ceil and UploadRate, as in [nodes.NAME].
	Rate, Ceil             tbf.Rate
	UploadRate, UploadCeil tbf.Rate
	// Interfaces names the [[interface]]s the node is on; empty: the
	// parent's, and for a top-level node every HTB interface.
	Interfaces []string
}

// WithNode returns a copy of p with the node s added (Source
// RuntimeSource), checked as a [nodes.NAME] table is: a valid name that no
// node has, a known parent, at most MaxNodeDepth levels, a rate, a ceil
// not below it, and interfaces that are HTB [[interface]]s the parent is
// on. p is not changed; the copy shares everything but its nodes with p.
// Its cost grows with the number of nodes, not of users.
func (p *Plan) WithNode(s NodeSpec) (*Plan, error) {
	if !ValidName(s.Name) {
		return nil, fmt.Errorf("node name %q is not valid: use %s", s.Name, NameRule)
	}
	if n, ok := p.Node(s.Name); ok {
		return nil, fmt.Errorf("node %s exists already (%s)", s.Name, n.Source)
	}
	if s.Rate == 0 {
		return nil, fmt.Errorf("node %s: no rate given", s.Name)
	}
	if s.Ceil != 0 && s.Ceil < s.Rate {
		return nil, fmt.Errorf("node %s: ceil %s is below its rate %s", s.Name, s.Ceil, s.Rate)
	}
	if s.UploadCeil != 0 && s.UploadRate != 0 && s.UploadCeil < s.UploadRate {
		return nil, fmt.Errorf("node %s: upload ceil %s is below its upload rate %s", s.Name, s.UploadCeil, s.UploadRate)
	}
	n := Node{Name: s.Name, Source: RuntimeSource, Rate: s.Rate, Ceil: s.Ceil, UploadRate: s.UploadRate, UploadCeil: s.UploadCeil}
	if n.Ceil == 0 {
		n.Ceil = n.Rate
	}
	if n.UploadRate == 0 {
		n.UploadRate = n.Rate
	}
	if n.UploadCeil == 0 {
		n.UploadCeil = max(n.Ceil, n.UploadRate)
	}
	n.UploadCeil = max(n.UploadCeil, n.UploadRate)
	var parent *Node
	if s.Parent != "" {
		var ok bool
		if parent, ok = p.Node(s.Parent); !ok {
			return nil, fmt.Errorf("node %s: unknown parent node %q (%s)", s.Name, s.Parent, nodeList(p.Nodes))
		}
		n.Parent = parent.Name
		n.Path, n.Depth = parent.Path+"/"+n.Name, parent.Depth+1
		if n.Depth > MaxNodeDepth {
			return nil, fmt.Errorf("node %s would be %d levels deep (%s); at most %d fit in the kernel's HTB tree (8 classes deep: the interface's root, %d node levels and the user)",
				s.Name, n.Depth, n.Path, MaxNodeDepth, MaxNodeDepth)
		}
	} else {
		n.Path, n.Depth = n.Name, 1
	}
	for _, in := range s.Interfaces {
		switch {
		case !htbInterface(p.Interfaces, in):
			return nil, fmt.Errorf("node %s is on interface %q, which no [[interface]] with shaper = \"htb\" configures", s.Name, in)
		case parent != nil && !parent.On(in):
			return nil, fmt.Errorf("node %s is on interface %s, which its parent %s is not on (%s)", s.Name, in, parent.Name, strings.Join(parent.Interfaces, ", "))
		case !slices.Contains(n.Interfaces, in):
			n.Interfaces = append(n.Interfaces, in)
		}
	}
	if len(s.Interfaces) == 0 && parent != nil {
		n.Interfaces = parent.Interfaces
	}
	q := *p
	q.Nodes = make([]Node, 0, len(p.Nodes)+1)
	at := slices.IndexFunc(p.Nodes, func(m Node) bool {
		return m.Depth > n.Depth || m.Depth == n.Depth && m.Name > n.Name
	})
	if at < 0 {
		at = len(p.Nodes)
	}
	q.Nodes = append(q.Nodes, p.Nodes[:at]...)
	q.Nodes = append(q.Nodes, n)
	q.Nodes = append(q.Nodes, p.Nodes[at:]...)
	q.indexNodes()
	return &q, nil
}

// WithoutNode returns a copy of p without the node called name (or
// written as its path). It refuses a node that other nodes or any user
// are behind, naming them (at most five). p is not changed.
func (p *Plan) WithoutNode(name string) (*Plan, error) {
	n, ok := p.Node(name)
	if !ok {
		return nil, fmt.Errorf("unknown node %q (%s)", name, nodeList(p.Nodes))
	}
	var children, users []string
	for i := range p.Nodes {
		if p.Nodes[i].Parent == n.Name {
			children = append(children, p.Nodes[i].Name)
		}
	}
	for i := range p.Users {
		if p.Users[i].Node == n.Name {
			users = append(users, p.Users[i].Name)
		}
	}
	switch {
	case len(children) > 0:
		return nil, fmt.Errorf("node %s has %d child nodes (%s): remove them first", n.Name, len(children), firstNames(children))
	case len(users) > 0:
		return nil, fmt.Errorf("node %s has %d users behind it (%s): move them first (shaperctl user move, or their node key)", n.Name, len(users), firstNames(users))
	}
	q := *p
	q.Nodes = slices.DeleteFunc(slices.Clone(p.Nodes), func(m Node) bool { return m.Name == n.Name })
	q.indexNodes()
	return &q, nil
}

// firstNames lists names for a message: the first five, then how many
// more.
func firstNames(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}
