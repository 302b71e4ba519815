package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// Network is LibreQoS's network.json as shaperd nodes: the hierarchy of
// sites and access points that circuits name in their Parent Node column.
type Network struct {
	// File names network.json in errors.
	File string
	// Nodes are the shaped nodes in file order, each after its parent.
	Nodes []NetworkNode
	// Virtual are LibreQoS's logical-only nodes ("virtual": true), which
	// LibreQoS does not shape and neither does shaperd: their children
	// and circuits hang from their nearest shaped ancestor (Parent).
	Virtual []NetworkNode
	// byOriginal finds nodes by their LibreQoS name: Nodes[i] for i >= 0,
	// Virtual[-i-1] for i < 0.
	byOriginal map[string][]int
}

// NetworkNode is one node of network.json.
type NetworkNode struct {
	// Name is the node's shaperd name (config.NameRule, unique across the
	// hierarchy); Original is its name in network.json. Virtual nodes
	// have no Name.
	Name, Original string
	// Parent is the Name of the nearest shaped node above this one; ""
	// for a top-level node.
	Parent string
	// Path is the network.json names from the top down to this node,
	// joined with "/" (virtual nodes included).
	Path string
	// Depth counts the shaped nodes from the top down to this one (1: a
	// top-level node).
	Depth int
	// Rate and Ceil are the download guarantee and capacity, UploadRate
	// and UploadCeil the upload ones: the capacity is
	// downloadBandwidthMbps (uploadBandwidthMbps), the guarantee
	// downloadBandwidthMbpsMin (uploadBandwidthMbpsMin) where given, else
	// the capacity.
	Rate, Ceil, UploadRate, UploadCeil tbf.Rate
	// Line is the line of the node's name in network.json.
	Line int
}

// Renamed reports whether the node's shaperd name is not its network.json
// name.
func (n *NetworkNode) Renamed() bool { return n.Name != n.Original }

// The keys of a network.json node that shaperd reads, with the aliases
// LibreQoS accepts; other keys ("type", "id", coordinates...) are ignored.
var capacityKeys = map[string]int{
	"downloadBandwidthMbps":    0,
	"maxDownload":              0,
	"uploadBandwidthMbps":      1,
	"maxUpload":                1,
	"downloadBandwidthMbpsMin": 2,
	"minDownload":              2,
	"uploadBandwidthMbpsMin":   3,
	"minUpload":                3,
}

// rawNode is a node as read, before names and depths are settled.
type rawNode struct {
	orig    string
	line    int
	parent  int // index in the parser's nodes; -1 at the top
	path    string
	virtual bool
	// rates: download and upload capacity, download and upload minimum;
	// set says which were given (and on which line, for errors).
	rates [4]tbf.Rate
	set   [4]int
}

type netParser struct {
	file  string
	data  []byte
	dec   *json.Decoder
	nodes []rawNode
	errs  []error
}

// ReadNetwork reads LibreQoS's network.json (file names it in errors):
// an object of nodes keyed by name, each an object with
// downloadBandwidthMbps and uploadBandwidthMbps (Mbit/s, decimals allowed),
// optionally downloadBandwidthMbpsMin and uploadBandwidthMbpsMin, and
// children, an object of nodes of the same shape. "{}" is a flat network:
// no nodes. A node with "virtual": true is not shaped (as in LibreQoS): its
// children move up to its nearest shaped ancestor. Other keys are ignored.
//
// Every shaped node gets a shaperd name (see nodeNames), and no branch may
// have more than config.MaxNodeDepth shaped nodes. It returns the network,
// or every problem found, each naming its line.
func ReadNetwork(data []byte, file string) (*Network, []error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // saved by an editor that marks UTF-8
	p := &netParser{file: file, data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.UseNumber()
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, []error{lineErr(file, 0, "empty (a flat network, without nodes, is {})")}
	}
	if err := p.document(); err != nil {
		return nil, []error{err}
	}
	if p.errs != nil {
		return nil, p.errs
	}
	return p.network()
}

// document reads the whole file; a syntax error stops it.
func (p *netParser) document() error {
	tok, err := p.token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return p.errAt(p.line(), "the top level is %s, not an object of nodes keyed by name (a flat network is {})", describe(tok))
	}
	if err := p.nodeObject(-1, ""); err != nil {
		return err
	}
	if tok, err := p.dec.Token(); err != io.EOF {
		if err != nil {
			return p.syntax(err)
		}
		return p.errAt(p.line(), "%s after the top-level object", describe(tok))
	}
	return nil
}

// nodeObject reads the members of an object of nodes (its '{' read),
// children of node parent (-1: the top level) at path.
func (p *netParser) nodeObject(parent int, path string) error {
	seen := map[string]int{}
	for {
		tok, err := p.token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && d == '}' {
			return nil
		}
		name := tok.(string) // the decoder only returns strings as keys
		line := p.line()
		if first, dup := seen[name]; dup {
			p.errs = append(p.errs, lineErr(p.file, line, "node %q is already on line %d in the same object", name, first))
		}
		seen[name] = line
		full := name
		if path != "" {
			full = path + "/" + name
		}
		tok, err = p.token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			p.errs = append(p.errs, lineErr(p.file, line, "node %q is %s, not an object", full, describe(tok)))
			if err := p.skipRest(tok); err != nil {
				return err
			}
			continue
		}
		if err := p.node(rawNode{orig: name, line: line, parent: parent, path: full}); err != nil {
			return err
		}
	}
}

// node reads one node's members (its '{' read) and its children.
func (p *netParser) node(n rawNode) error {
	i := len(p.nodes)
	p.nodes = append(p.nodes, n)
	for {
		tok, err := p.token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && d == '}' {
			return nil
		}
		key := tok.(string)
		line := p.line()
		tok, err = p.token()
		if err != nil {
			return err
		}
		where := fmt.Sprintf("node %q: %s", p.nodes[i].path, key)
		if k, ok := capacityKeys[key]; ok {
			r, err := mbpsValue(tok)
			switch {
			case err != nil:
				p.errs = append(p.errs, lineErr(p.file, line, "%s: %v", where, err))
			case p.nodes[i].set[k] != 0:
				p.errs = append(p.errs, lineErr(p.file, line, "%s: the value is already given on line %d", where, p.nodes[i].set[k]))
			case r == 0 && k >= 2:
				// A minimum of 0: none given.
			default:
				p.nodes[i].rates[k], p.nodes[i].set[k] = r, line
			}
			if err := p.skipRest(tok); err != nil {
				return err
			}
			continue
		}
		switch key {
		case "children":
			if d, ok := tok.(json.Delim); ok && d == '{' {
				if err := p.nodeObject(i, p.nodes[i].path); err != nil {
					return err
				}
				continue
			}
			if tok != nil { // "children": null is none
				p.errs = append(p.errs, lineErr(p.file, line, "%s: %s, not an object of nodes", where, describe(tok)))
			}
		case "virtual":
			if b, ok := tok.(bool); ok {
				p.nodes[i].virtual = b
			} else {
				p.errs = append(p.errs, lineErr(p.file, line, "%s: %s, not true or false", where, describe(tok)))
			}
		}
		if err := p.skipRest(tok); err != nil {
			return err
		}
	}
}

// mbpsValue reads a JSON number (or a string holding one) of Mbit/s; 0
// stays 0 (parseMbps refuses it: the caller decides).
func mbpsValue(tok any) (tbf.Rate, error) {
	var s string
	switch v := tok.(type) {
	case json.Number:
		s = v.String()
	case string:
		s = strings.TrimSpace(v)
	default:
		return 0, fmt.Errorf("%s, not a number of Mbit/s", describe(tok))
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == 0 {
		return 0, nil
	}
	return parseMbps(s)
}

// skipRest skips the rest of a value whose first token was tok.
func (p *netParser) skipRest(tok any) error {
	d, ok := tok.(json.Delim)
	if !ok || d == '}' || d == ']' {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := p.token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

// token reads the next token; the end of the file is an error (every
// caller is inside an object).
func (p *netParser) token() (any, error) {
	tok, err := p.dec.Token()
	if err == io.EOF {
		return nil, p.errAt(bytes.Count(p.data, []byte("\n"))+1, "unexpected end of file: an object is not closed")
	}
	if err != nil {
		return nil, p.syntax(err)
	}
	return tok, nil
}

// syntax makes a decoder's error one naming the line.
func (p *netParser) syntax(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return p.errAt(p.lineOf(int(se.Offset)), "%v (not valid JSON)", se)
	}
	return lineErr(p.file, 0, "%v", err)
}

func (p *netParser) errAt(line int, format string, args ...any) error {
	return lineErr(p.file, line, format, args...)
}

// line is the line of the last token read.
func (p *netParser) line() int { return p.lineOf(int(p.dec.InputOffset())) }

// lineOf is the line of byte offset off (the byte before it: offsets
// point just past what was read).
func (p *netParser) lineOf(off int) int {
	off = min(max(off-1, 0), len(p.data))
	return bytes.Count(p.data[:off], []byte("\n")) + 1
}

// describe names a token's kind for errors.
func describe(tok any) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		return "the number " + v.String()
	case string:
		return "the string " + strconv.Quote(v)
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	}
	return fmt.Sprint(tok)
}

// network settles the nodes read: shaped parents and depths, capacities,
// names.
func (p *netParser) network() (*Network, []error) {
	shapedParent := make([]int, len(p.nodes)) // nearest shaped ancestor, -1: none
	depth := make([]int, len(p.nodes))
	var errs []error
	for i := range p.nodes {
		n := &p.nodes[i]
		sp := n.parent
		for sp >= 0 && p.nodes[sp].virtual {
			sp = shapedParent[sp]
		}
		shapedParent[i] = sp
		if sp >= 0 {
			depth[i] = depth[sp]
		}
		if n.virtual {
			continue
		}
		depth[i]++
		if depth[i] == config.MaxNodeDepth+1 {
			below := 0
			for j := i + 1; j < len(p.nodes); j++ {
				if isBelow(p.nodes, j, i) && !p.nodes[j].virtual {
					below++
				}
			}
			more := ""
			switch {
			case below == 1:
				more = " (and 1 node below it)"
			case below > 1:
				more = fmt.Sprintf(" (and %d nodes below it)", below)
			}
			errs = append(errs, lineErr(p.file, n.line, "node %q is %d levels deep (%s)%s: shaperd's hierarchy has at most %d (the kernel's HTB tree is 8 classes deep, and the interface's root and the user take two); hang it from a node higher up",
				n.orig, depth[i], n.path, more, config.MaxNodeDepth))
		}
		for k, key := range []string{"downloadBandwidthMbps", "uploadBandwidthMbps"} {
			if n.set[k] == 0 {
				errs = append(errs, lineErr(p.file, n.line, "node %q has no %s (its capacity in Mbit/s)", n.path, key))
			}
		}
		for k, key := range []string{"downloadBandwidthMbpsMin", "uploadBandwidthMbpsMin"} {
			if n.set[k+2] != 0 && n.set[k] != 0 && n.rates[k+2] > n.rates[k] {
				errs = append(errs, lineErr(p.file, n.set[k+2], "node %q: %s %s is above its capacity %s", n.path, key, n.rates[k+2], n.rates[k]))
			}
		}
	}
	if errs != nil {
		return nil, errs
	}
	var shaped []int
	for i := range p.nodes {
		if !p.nodes[i].virtual {
			shaped = append(shaped, i)
		}
	}
	origs := make([]string, len(shaped))
	for k, i := range shaped {
		origs[k] = p.nodes[i].orig
	}
	names := make([]string, len(p.nodes))
	for k, name := range nodeNames(origs) {
		names[shaped[k]] = name
	}
	net := &Network{File: p.file, byOriginal: map[string][]int{}}
	for i := range p.nodes {
		n := &p.nodes[i]
		nn := NetworkNode{Name: names[i], Original: n.orig, Path: n.path, Depth: depth[i], Line: n.line}
		if sp := shapedParent[i]; sp >= 0 {
			nn.Parent = names[sp]
		}
		if n.virtual {
			nn.Name = ""
			net.byOriginal[n.orig] = append(net.byOriginal[n.orig], -len(net.Virtual)-1)
			net.Virtual = append(net.Virtual, nn)
			continue
		}
		nn.Ceil, nn.UploadCeil = n.rates[0], n.rates[1]
		nn.Rate, nn.UploadRate = nn.Ceil, nn.UploadCeil
		if n.set[2] != 0 {
			nn.Rate = n.rates[2]
		}
		if n.set[3] != 0 {
			nn.UploadRate = n.rates[3]
		}
		net.byOriginal[n.orig] = append(net.byOriginal[n.orig], len(net.Nodes))
		net.Nodes = append(net.Nodes, nn)
	}
	return net, nil
}

// isBelow reports whether node j is a descendant of node i.
func isBelow(nodes []rawNode, j, i int) bool {
	for a := nodes[j].parent; a >= 0; a = nodes[a].parent {
		if a == i {
			return true
		}
	}
	return false
}

// nodeNames gives each network.json name (in file order) a shaperd name,
// deterministically: a name that follows config.NameRule is kept; another
// is lower-cased with each run of other characters made one '-' and '-'
// trimmed from its ends ("Site 1" is site-1, "AP_A" ap_a), "node" when
// nothing is left. A name taken already gets "-2", "-3", ... Names kept
// as they are claim theirs first, so a name that is valid already is
// never moved aside by another one mapped onto it; among equal names the
// first in the file keeps its name.
func nodeNames(origs []string) []string {
	names := make([]string, len(origs))
	taken := map[string]bool{}
	for i, o := range origs {
		if config.ValidName(o) && !taken[o] {
			names[i] = o
			taken[o] = true
		}
	}
	for i, o := range origs {
		if names[i] != "" {
			continue
		}
		base := sanitize(o)
		if base == "" {
			base = "node"
		}
		name := base
		for n := 2; taken[name]; n++ {
			suffix := "-" + strconv.Itoa(n)
			name = strings.TrimRight(base[:min(len(base), 64-len(suffix))], "-") + suffix
		}
		names[i] = name
		taken[name] = true
	}
	return names
}

// Renamed returns the shaped nodes whose shaperd name is not their
// network.json name, in file order.
func (n *Network) Renamed() []NetworkNode {
	var out []NetworkNode
	for _, nn := range n.Nodes {
		if nn.Renamed() {
			out = append(out, nn)
		}
	}
	return out
}

// nodeFor returns the shaperd node a circuit's Parent Node names: "" for
// none ("" or "none", and a virtual node with no shaped node above it).
func (n *Network) nodeFor(parent string) (string, error) {
	if parent == "" || strings.EqualFold(parent, "none") {
		return "", nil
	}
	refs := n.byOriginal[parent]
	switch len(refs) {
	case 0:
		if len(n.Nodes)+len(n.Virtual) == 0 {
			return "", fmt.Errorf("the Parent Node %q is not in %s, which has no nodes (a flat network: leave Parent Node empty or \"none\")", parent, n.File)
		}
		msg := fmt.Sprintf("Parent Node %q is not a node of %s", parent, n.File)
		all := make([]string, 0, len(n.byOriginal))
		for k := range n.byOriginal {
			all = append(all, k)
		}
		slices.Sort(all)
		if s := closest(parent, all); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return "", errors.New(msg)
	case 1:
		nn := n.ref(refs[0])
		if nn.Name == "" { // virtual: its nearest shaped ancestor
			return nn.Parent, nil
		}
		return nn.Name, nil
	}
	paths := make([]string, len(refs))
	for i, r := range refs {
		nn := n.ref(r)
		paths[i] = fmt.Sprintf("%s (line %d)", nn.Path, nn.Line)
	}
	return "", fmt.Errorf("the Parent Node %q is ambiguous: %s has %d nodes of that name, at %s", parent, n.File, len(refs), strings.Join(paths, ", "))
}

func (n *Network) ref(i int) *NetworkNode {
	if i < 0 {
		return &n.Virtual[-i-1]
	}
	return &n.Nodes[i]
}

// AssignNodes sets each user's node from its circuit's Parent Node in net
// (users[i] is circuits[i]'s user; file names the circuits' source in
// errors). A nil net, no --network, leaves every user without a node, as
// does a Parent Node that is empty or "none". A Parent Node that is not in
// net, or that a circuit's devices disagree on, is an error at its row.
func AssignNodes(circuits []Circuit, users []User, net *Network, file string) []error {
	if net == nil {
		return nil
	}
	var errs []error
	for i, c := range circuits {
		if c.parentConflict != nil {
			pc := c.parentConflict
			errs = append(errs, lineErr(file, pc.line, "circuit %s: Parent Node %q, but %q on line %d; a circuit's devices share one parent node",
				c.ID, pc.name, c.ParentNode, c.Line))
			continue
		}
		node, err := net.nodeFor(c.ParentNode)
		if err != nil {
			errs = append(errs, lineErr(file, c.Line, "circuit %s: %v", c.ID, err))
			continue
		}
		users[i].Node = node
	}
	return errs
}

// closest returns the candidate key most likely meant: one equal but for
// case, else the nearest by edit distance when it is at most 2 edits and
// fewer than half of key's length; "" when none is close.
func closest(key string, candidates []string) string {
	for _, c := range candidates {
		if strings.EqualFold(c, key) {
			return c
		}
	}
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(key, c); d < bestD && 2*d < len(key) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b in bytes
// (large for long strings, which are never close here).
func editDistance(a, b string) int {
	if len(a) > 128 || len(b) > 128 {
		return 1 << 20
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
