package sim

import (
	"fmt"
	"math"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
)

// pclass is one HTB class in a packet-level run: its kernel state (tokens
// and ctokens in ns, t_c, deficits) and parameters.
type pclass struct {
	c        model.Class
	parent   int // -1 for a top-level class
	leaf     int // queue index, -1 for an inner class
	level    int
	prio     int
	quantum  int64
	rate     tbf.RateConfig
	ceil     tbf.RateConfig
	buffer   int64 // ns
	cbuffer  int64 // ns
	tokens   int64 // ns
	ctokens  int64 // ns
	tc       int64 // ns: the last time tokens were accounted
	deficit  [htbMaxDepth]int64
	children int
}

// htbEngine is sch_htb's dequeue: rows per level and prio, DRR among the
// leaves a lender serves, token accounting on the leaf and every ancestor.
type htbEngine struct {
	cls    []pclass
	leaves []int // class index per queue
	byH    map[model.Handle]int
	// ptr is the DRR position per (lender, prio): the handle of the leaf
	// whose turn it is (the level-0 row uses lender -1).
	ptr   map[[2]int]model.Handle
	chain []int // scratch
	cand  []int // scratch
}

func newHTBEngine(t *model.Tree) (*htbEngine, error) {
	e := &htbEngine{byH: make(map[model.Handle]int, len(t.Classes)), ptr: map[[2]int]model.Handle{}}
	e.cls = make([]pclass, len(t.Classes))
	for i, c := range t.Classes {
		if _, dup := e.byH[c.Handle]; dup {
			return nil, fmt.Errorf("class %s listed twice", c.Handle)
		}
		e.byH[c.Handle] = i
		e.cls[i].parent = -1
	}
	for i, c := range t.Classes {
		if c.Parent == t.Root.Handle || c.Parent.Minor() == 0 {
			continue
		}
		p, ok := e.byH[c.Parent]
		if !ok {
			return nil, fmt.Errorf("class %s: parent %s not in the tree", c.Handle, c.Parent)
		}
		e.cls[i].parent = p
		e.cls[p].children++
	}
	for i := range e.cls {
		n := &e.cls[i]
		n.leaf = -1
		if n.children == 0 {
			n.leaf = len(e.leaves)
			e.leaves = append(e.leaves, i)
			continue
		}
		level, depth := htbMaxDepth-1, 0
		for j := n.parent; j >= 0; j = e.cls[j].parent {
			level--
			if depth++; depth >= htbMaxDepth {
				return nil, fmt.Errorf("class %s: more than %d levels (or a parent loop)", t.Classes[i].Handle, htbMaxDepth)
			}
		}
		if level < 1 {
			return nil, fmt.Errorf("class %s: more than %d levels", t.Classes[i].Handle, htbMaxDepth)
		}
		n.level = level
	}
	for i := range e.cls {
		if err := e.set(i, t.Classes[i]); err != nil {
			return nil, err
		}
		n := &e.cls[i]
		n.tokens, n.ctokens = n.buffer, n.cbuffer // htb_change_class creating a class
	}
	return e, nil
}

// set loads c's parameters into class i (tokens untouched).
func (e *htbEngine) set(i int, c model.Class) error {
	n := &e.cls[i]
	n.c = c
	ceil := c.Ceil
	if ceil == 0 {
		ceil = c.Rate
	}
	buf, err := bucketNS(c.Rate, c.Burst, c.Buffer)
	if err != nil {
		return fmt.Errorf("class %s: burst: %w", c.Handle, err)
	}
	cbuf, err := bucketNS(ceil, c.CBurst, c.CBuffer)
	if err != nil {
		return fmt.Errorf("class %s: cburst: %w", c.Handle, err)
	}
	q := c.Quantum
	if q == 0 {
		q = kernelQuantum(&c)
	}
	n.rate = tbf.NewRateConfig(c.Rate.BytesPerSecond(), 0, 0)
	n.ceil = tbf.NewRateConfig(ceil.BytesPerSecond(), 0, 0)
	n.buffer, n.cbuffer, n.quantum = buf, cbuf, int64(q)
	n.prio = int(min(c.Prio, htbMaxDepth-1))
	return nil
}

// bucketNS is a class's bucket in ns: the ticks given, else those of burst
// (tbf.RecommendedBurst of rate when 0), as model.Build computes them.
func bucketNS(rate tbf.Rate, burst tbf.Size, ticks uint32) (int64, error) {
	if ticks == 0 {
		if burst == 0 {
			burst = tbf.RecommendedBurst(rate)
		}
		t, err := tbf.BufferTicks(rate, burst)
		if err != nil {
			return 0, err
		}
		ticks = t
	}
	return tbf.TicksToNS(ticks), nil
}

func (e *htbEngine) sources() int  { return len(e.leaves) }
func (e *htbEngine) counters() int { return len(e.cls) }

func (e *htbEngine) source(h model.Handle) (int, bool) {
	i, ok := e.byH[h]
	if !ok || e.cls[i].leaf < 0 {
		return 0, false
	}
	return e.cls[i].leaf, true
}

// change is htb_change_class on every class of t: new rates, buffers,
// quantum and prio; tokens, ctokens and t_c are kept.
func (e *htbEngine) change(t *model.Tree, _ int64) error {
	for _, c := range t.Classes {
		i, ok := e.byH[c.Handle]
		if !ok {
			return fmt.Errorf("class %s: not in the running tree (classes cannot be added)", c.Handle)
		}
		if err := e.set(i, c); err != nil {
			return err
		}
	}
	return nil
}

// mode is htb_class_mode at now, with diff capped at the 60 s mbuffer. It
// also returns the ns until the mode may change (0: never by itself).
func (e *htbEngine) mode(i int, now int64) (tbf.HTBMode, int64) {
	n := &e.cls[i]
	diff := min(now-n.tc, tbf.HTBMaxBufferNS)
	return tbf.HTBClassMode(n.tokens, n.ctokens, diff)
}

// lender returns the level a backlogged leaf may send at and the class it
// sends on (itself at level 0, else the ancestor that lends), or -1: the
// leaf or a class between it and any lender is over its ceil, or no
// ancestor has rate tokens. HTB puts a class that may borrow into its
// parent's feed; the first ancestor up the chain that can send on its rate
// serves it.
func (e *htbEngine) lender(leaf int, now int64) (level, by int) {
	for i := leaf; i >= 0; i = e.cls[i].parent {
		m, _ := e.mode(i, now)
		switch m {
		case tbf.HTBCanSend:
			return e.cls[i].level, i
		case tbf.HTBCantSend:
			return -1, -1
		}
	}
	return -1, -1
}

func (e *htbEngine) dequeue(now, pkt int64, backlog []int64) (int, []int, int64) {
	bestLevel, bestPrio, bestBy := htbMaxDepth, htbMaxDepth, -1
	e.cand = e.cand[:0]
	for q, i := range e.leaves {
		if backlog[q] <= 0 {
			continue
		}
		level, by := e.lender(i, now)
		if by < 0 {
			continue
		}
		prio := e.cls[i].prio
		switch {
		case level < bestLevel || level == bestLevel && prio < bestPrio ||
			level == bestLevel && prio == bestPrio && level > 0 && e.cls[by].c.Handle < e.cls[bestBy].c.Handle:
			bestLevel, bestPrio, bestBy = level, prio, by
			e.cand = append(e.cand[:0], i)
		case level == bestLevel && prio == bestPrio && (level == 0 || by == bestBy):
			e.cand = append(e.cand, i)
		}
	}
	if len(e.cand) == 0 {
		return -1, nil, e.wake(now, backlog)
	}
	lenderKey := -1
	if bestLevel > 0 {
		lenderKey = bestBy
	}
	key := [2]int{lenderKey, bestPrio}
	// DRR: the candidate whose turn it is: the first at or after the
	// pointer in handle order (the kernel's feeds are rb-trees by
	// classid), wrapping round to the lowest handle.
	at := e.ptr[key]
	pick, first := -1, e.cand[0]
	for _, i := range e.cand {
		h := e.cls[i].c.Handle
		if h < e.cls[first].c.Handle {
			first = i
		}
		if h >= at && (pick < 0 || h < e.cls[pick].c.Handle) {
			pick = i
		}
	}
	if pick < 0 {
		pick = first
	}
	n := &e.cls[pick]
	n.deficit[bestLevel] -= pkt
	e.ptr[key] = n.c.Handle
	if n.deficit[bestLevel] < 0 {
		n.deficit[bestLevel] += n.quantum
		e.ptr[key] = n.c.Handle + 1
	}
	e.charge(pick, bestLevel, pkt, now)
	return n.leaf, e.chain, 0
}

// charge is htb_charge_class: the leaf and every ancestor are charged
// ceil tokens; those at or above the level it was sent at are charged
// rate tokens, those below only move their clock (their tokens grow by
// the time passed).
func (e *htbEngine) charge(leaf, level int, pkt, now int64) {
	e.chain = e.chain[:0]
	for i := leaf; i >= 0; i = e.cls[i].parent {
		n := &e.cls[i]
		diff := min(now-n.tc, tbf.HTBMaxBufferNS)
		if n.level >= level {
			n.tokens = tbf.HTBAccount(n.tokens, n.buffer, diff, int64(n.rate.L2T(int(pkt))))
		} else {
			n.tokens += diff
		}
		n.ctokens = tbf.HTBAccount(n.ctokens, n.cbuffer, diff, int64(n.ceil.L2T(int(pkt))))
		n.tc = now
		e.chain = append(e.chain, i)
	}
}

// wake is the earliest time after now at which a class on the path of a
// backlogged leaf changes mode (its place in HTB's wait queue).
func (e *htbEngine) wake(now int64, backlog []int64) int64 {
	w := int64(math.MaxInt64)
	for q, leaf := range e.leaves {
		if backlog[q] <= 0 {
			continue
		}
		for i := leaf; i >= 0; i = e.cls[i].parent {
			if _, d := e.mode(i, now); d > 0 {
				w = min(w, now+d)
			}
		}
	}
	return w
}

func (e *htbEngine) series(bytes [][]uint64) []ClassSeries {
	out := make([]ClassSeries, len(e.cls))
	for i := range e.cls {
		c := e.cls[i].c
		out[i] = ClassSeries{Handle: c.Handle, Parent: c.Parent, Labels: c.Labels, Bytes: bytes[i]}
	}
	return out
}
