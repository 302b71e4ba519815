package sim

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// pclass is one HTB class in a packet-level run: its kernel state (tokens
// and ctokens in ns, t_c, deficits) and parameters.
type pclass struct {
	c       model.Class
	parent  int   // -1 for a top-level class
	leaf    int   // queue index, -1 for an inner class
	inner   []int // inner children, in handle order
	level   int
	prio    int
	quantum int64
	rate    psched.RateConfig
	ceil    psched.RateConfig
	buffer  int64 // ns
	cbuffer int64 // ns
	tokens  int64 // ns
	ctokens int64 // ns
	tc      int64 // ns: the last time tokens were accounted
	deficit [htbMaxDepth]int64
}

// htbState is an HTB tree's classes and their token state: what
// htb_change_class sets and htb_charge_class charges.
type htbState struct {
	cls    []pclass
	leaves []int // class index per queue, in handle order
	byH    map[model.Handle]int
	chain  []int // scratch: the classes charged for the last packet
}

func newHTBState(t *model.Tree) (*htbState, error) {
	e := &htbState{byH: make(map[model.Handle]int, len(t.Classes))}
	e.cls = make([]pclass, len(t.Classes))
	order := make([]int, len(t.Classes))
	for i, c := range t.Classes {
		if _, dup := e.byH[c.Handle]; dup {
			return nil, fmt.Errorf("class %s listed twice", c.Handle)
		}
		e.byH[c.Handle] = i
		e.cls[i].parent, e.cls[i].leaf = -1, -1
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(t.Classes[a].Handle) - int(t.Classes[b].Handle) })
	children := make([]int, len(t.Classes))
	for _, i := range order {
		c := t.Classes[i]
		if c.Parent == t.Root.Handle || c.Parent.Minor() == 0 {
			continue
		}
		p, ok := e.byH[c.Parent]
		if !ok {
			return nil, fmt.Errorf("class %s: parent %s not in the tree", c.Handle, c.Parent)
		}
		e.cls[i].parent = p
		children[p]++
	}
	for _, i := range order {
		n := &e.cls[i]
		if children[i] == 0 {
			n.leaf = len(e.leaves)
			e.leaves = append(e.leaves, i)
			continue
		}
		if n.parent >= 0 {
			e.cls[n.parent].inner = append(e.cls[n.parent].inner, i)
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
func (e *htbState) set(i int, c model.Class) error {
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
	n.rate = psched.NewRateConfig(c.Rate.BytesPerSecond(), 0, 0)
	n.ceil = psched.NewRateConfig(ceil.BytesPerSecond(), 0, 0)
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
	return psched.TicksToNS(ticks), nil
}

func (e *htbState) sources() int  { return len(e.leaves) }
func (e *htbState) counters() int { return len(e.cls) }

func (e *htbState) source(h model.Handle) (int, bool) {
	i, ok := e.byH[h]
	if !ok || e.cls[i].leaf < 0 {
		return 0, false
	}
	return e.cls[i].leaf, true
}

// setAll is htb_change_class on every class of t: new rates, buffers,
// quantum and prio; tokens, ctokens and t_c are kept.
func (e *htbState) setAll(t *model.Tree) error {
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
// also returns the ns until the mode changes by itself (0: never).
func (e *htbState) mode(i int, now int64) (psched.HTBMode, int64) {
	n := &e.cls[i]
	diff := min(now-n.tc, psched.HTBMaxBufferNS)
	return psched.HTBClassMode(n.tokens, n.ctokens, diff)
}

// drr takes one packet from leaf pick at level in its DRR round: it
// returns whether the leaf's turn is over (its deficit went negative and
// was topped up by its quantum).
func (e *htbState) drr(pick, level int, pkt int64) (next bool) {
	n := &e.cls[pick]
	n.deficit[level] -= pkt
	if n.deficit[level] < 0 {
		n.deficit[level] += n.quantum
		return true
	}
	return false
}

// charge is htb_charge_class: the leaf and every ancestor are charged
// ceil tokens; those at or above the level it was sent at are charged
// rate tokens, those below only move their clock (their tokens grow by
// the time passed).
func (e *htbState) charge(leaf, level int, pkt, now int64) {
	e.chain = e.chain[:0]
	for i := leaf; i >= 0; i = e.cls[i].parent {
		n := &e.cls[i]
		diff := min(now-n.tc, psched.HTBMaxBufferNS)
		if n.level >= level {
			n.tokens = psched.HTBTokens(n.tokens, n.buffer, diff, int64(n.rate.L2T(int(pkt))))
		} else {
			n.tokens += diff
		}
		n.ctokens = psched.HTBTokens(n.ctokens, n.cbuffer, diff, int64(n.ceil.L2T(int(pkt))))
		n.tc = now
		e.chain = append(e.chain, i)
	}
}

func (e *htbState) series(bytes [][]uint64) []ClassSeries {
	out := make([]ClassSeries, len(e.cls))
	for i := range e.cls {
		c := e.cls[i].c
		out[i] = ClassSeries{Handle: c.Handle, Parent: c.Parent, Labels: c.Labels, Bytes: bytes[i]}
	}
	return out
}

// htbEngine is sch_htb's dequeue, kept incrementally as the kernel does:
// every class's mode is cached and re-evaluated when it was charged or when
// its wait time is up (a wait queue); a backlogged leaf that can send on
// its rate sits in the level-0 row of its prio, one that may borrow in its
// parent's feed of its prio. A packet goes to the lowest level, then the
// lowest prio, that has a leaf: at level 0 from the row, at level L from
// the feeds reachable from the lowest-handle class of level L that can
// send (through classes that may borrow). Among those leaves, deficit
// round robin by quantum, in handle order. The cost of a packet is
// independent of the number of classes except for the bit scans.
type htbEngine struct {
	*htbState
	busy  []bool           // per queue: backlogged
	modes []psched.HTBMode // cached mode per class
	wait  waitQueue        // classes whose mode changes by itself
	row0  [htbMaxDepth]leafSet
	feeds [][htbMaxDepth]leafSet // per class (inner classes only)
	where []*leafSet             // per queue: the set it is in, nil none
	byLvl [htbMaxDepth][]int     // inner classes per level, handle order
	ptr   map[[2]int]int         // DRR position per (lender or -1, prio): queue index
	reach []*leafSet             // scratch
}

func newHTBEngine(t *model.Tree) (*htbEngine, error) {
	s, err := newHTBState(t)
	if err != nil {
		return nil, err
	}
	nl := len(s.leaves)
	e := &htbEngine{htbState: s, busy: make([]bool, nl), modes: make([]psched.HTBMode, len(s.cls)),
		feeds: make([][htbMaxDepth]leafSet, len(s.cls)), where: make([]*leafSet, nl), ptr: map[[2]int]int{}}
	e.wait.init(len(s.cls))
	for p := range e.row0 {
		e.row0[p] = newLeafSet(nl)
	}
	order := make([]int, 0, len(s.cls))
	for i := range s.cls {
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int { return int(s.cls[a].c.Handle) - int(s.cls[b].c.Handle) })
	for _, i := range order {
		if s.cls[i].leaf < 0 {
			for p := range e.feeds[i] {
				e.feeds[i][p] = newLeafSet(nl)
			}
			e.byLvl[s.cls[i].level] = append(e.byLvl[s.cls[i].level], i)
		}
		e.remode(i, 0)
	}
	return e, nil
}

// remode re-evaluates class i's mode at now, files it in the wait queue
// and re-places it when it is a leaf.
func (e *htbEngine) remode(i int, now int64) {
	m, w := e.mode(i, now)
	e.modes[i] = m
	if w > 0 {
		e.wait.set(i, now+w)
	} else {
		e.wait.remove(i)
	}
	if q := e.cls[i].leaf; q >= 0 {
		e.place(q)
	}
}

// place puts queue q in the set its backlog and cached mode call for.
func (e *htbEngine) place(q int) {
	i := e.leaves[q]
	n := &e.cls[i]
	var want *leafSet
	if e.busy[q] {
		switch e.modes[i] {
		case psched.HTBCanSend:
			want = &e.row0[n.prio]
		case psched.HTBMayBorrow:
			if n.parent >= 0 {
				want = &e.feeds[n.parent][n.prio]
			}
		}
	}
	if want == e.where[q] {
		return
	}
	if e.where[q] != nil {
		e.where[q].clear(q)
	}
	if want != nil {
		want.add(q)
	}
	e.where[q] = want
}

func (e *htbEngine) backlogged(q int, on bool, _ int64) {
	e.busy[q] = on
	e.place(q)
}

func (e *htbEngine) change(t *model.Tree, now int64) error {
	if err := e.setAll(t); err != nil {
		return err
	}
	for i := range e.cls { // prios may have changed
		e.remode(i, now)
	}
	return nil
}

// has reports whether lender x has a backlogged leaf of prio p in its
// feed or in that of a descendant that may borrow through it.
func (e *htbEngine) has(x, p int) bool {
	if e.feeds[x][p].n > 0 {
		return true
	}
	for _, y := range e.cls[x].inner {
		if e.modes[y] == psched.HTBMayBorrow && e.has(y, p) {
			return true
		}
	}
	return false
}

// collect appends the feeds of prio p reachable from x to e.reach.
func (e *htbEngine) collect(x, p int) {
	if e.feeds[x][p].n > 0 {
		e.reach = append(e.reach, &e.feeds[x][p])
	}
	for _, y := range e.cls[x].inner {
		if e.modes[y] == psched.HTBMayBorrow {
			e.collect(y, p)
		}
	}
}

func (e *htbEngine) dequeue(now, pkt int64) (int, []int, int64) {
	for e.wait.len() > 0 && e.wait.minAt() <= now {
		e.remode(e.wait.minClass(), now)
	}
	level, prio, by := -1, -1, -1
	for p := range e.row0 {
		if e.row0[p].n > 0 {
			level, prio = 0, p
			break
		}
	}
	for l := 1; level < 0 && l < htbMaxDepth; l++ {
		best := htbMaxDepth
		for _, x := range e.byLvl[l] {
			if e.modes[x] != psched.HTBCanSend {
				continue
			}
			for p := 0; p < best; p++ {
				if e.has(x, p) {
					best, by = p, x
					break
				}
			}
		}
		if by >= 0 {
			level, prio = l, best
		}
	}
	if level < 0 {
		if e.wait.len() == 0 {
			return -1, nil, math.MaxInt64
		}
		return -1, nil, e.wait.minAt()
	}
	e.reach = e.reach[:0]
	if level == 0 {
		e.reach = append(e.reach, &e.row0[prio])
	} else {
		e.collect(by, prio)
	}
	key := [2]int{by, prio}
	at := e.ptr[key]
	pick := -1
	for _, s := range e.reach {
		if q := s.next(at); q >= 0 && (pick < 0 || q < pick) {
			pick = q
		}
	}
	if pick < 0 {
		for _, s := range e.reach {
			if q := s.next(0); q >= 0 && (pick < 0 || q < pick) {
				pick = q
			}
		}
	}
	leaf := e.leaves[pick]
	e.ptr[key] = pick
	if e.drr(leaf, level, pkt) {
		e.ptr[key] = pick + 1
	}
	e.charge(leaf, level, pkt, now)
	for _, i := range e.chain {
		e.remode(i, now)
	}
	return pick, e.chain, 0
}

// leafSet is a set of queue indices (a bitmap) with its size.
type leafSet struct {
	w []uint64
	n int
}

func newLeafSet(n int) leafSet { return leafSet{w: make([]uint64, (n+63)/64)} }

func (s *leafSet) add(q int) {
	if s.w[q/64]&(1<<(q%64)) == 0 {
		s.w[q/64] |= 1 << (q % 64)
		s.n++
	}
}

func (s *leafSet) clear(q int) {
	if s.w[q/64]&(1<<(q%64)) != 0 {
		s.w[q/64] &^= 1 << (q % 64)
		s.n--
	}
}

// next returns the lowest member >= from, or -1.
func (s *leafSet) next(from int) int {
	if s.n == 0 {
		return -1
	}
	from = max(from, 0)
	for wi := from / 64; wi < len(s.w); wi++ {
		w := s.w[wi]
		if wi == from/64 {
			w &= ^uint64(0) << (from % 64)
		}
		if w != 0 {
			return wi*64 + trailingZeros(w)
		}
	}
	return -1
}

// waitQueue is HTB's wait queue: classes by the time their mode changes,
// a binary heap indexed by class.
type waitQueue struct {
	heap []int   // class indices
	pos  []int   // heap position per class, -1 none
	at   []int64 // wake time per class
}

func (w *waitQueue) init(n int) {
	w.pos = make([]int, n)
	w.at = make([]int64, n)
	for i := range w.pos {
		w.pos[i] = -1
	}
}

func (w *waitQueue) len() int      { return len(w.heap) }
func (w *waitQueue) minAt() int64  { return w.at[w.heap[0]] }
func (w *waitQueue) minClass() int { return w.heap[0] }
func (w *waitQueue) less(a, b int) bool {
	ca, cb := w.heap[a], w.heap[b]
	return w.at[ca] < w.at[cb] || w.at[ca] == w.at[cb] && ca < cb
}

func (w *waitQueue) swap(a, b int) {
	w.heap[a], w.heap[b] = w.heap[b], w.heap[a]
	w.pos[w.heap[a]], w.pos[w.heap[b]] = a, b
}

func (w *waitQueue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !w.less(i, p) {
			return
		}
		w.swap(i, p)
		i = p
	}
}

func (w *waitQueue) down(i int) {
	for {
		l, m := 2*i+1, i
		if l < len(w.heap) && w.less(l, m) {
			m = l
		}
		if l+1 < len(w.heap) && w.less(l+1, m) {
			m = l + 1
		}
		if m == i {
			return
		}
		w.swap(i, m)
		i = m
	}
}

// set files class c to wake at t.
func (w *waitQueue) set(c int, t int64) {
	w.at[c] = t
	if p := w.pos[c]; p >= 0 {
		w.up(p)
		w.down(w.pos[c])
		return
	}
	w.heap = append(w.heap, c)
	w.pos[c] = len(w.heap) - 1
	w.up(w.pos[c])
}

// remove takes class c out of the queue.
func (w *waitQueue) remove(c int) {
	p := w.pos[c]
	if p < 0 {
		return
	}
	last := len(w.heap) - 1
	w.swap(p, last)
	w.heap = w.heap[:last]
	w.pos[c] = -1
	if p < last {
		x := w.heap[p]
		w.up(p)
		w.down(w.pos[x])
	}
}

func trailingZeros(w uint64) int { return bits.TrailingZeros64(w) }
