package model

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// Per-queue trees under mq (InterfaceSpec.Queues > 1): the device's root
// qdisc is mq (handle MQHandle) and transmit queue q (0-based) holds an HTB
// tree of its own with handle QueueHandle(q) under mq's class q+1, with the
// same layout as the single tree (root class major:1, default class
// major:2, tier and user minors) and its own class-id space.
const (
	// ShaperMQ is the kind of the root qdisc of per-queue trees.
	ShaperMQ ShaperKind = "mq"
	// MQHandle is the handle shaperd gives the mq root qdisc.
	MQHandle Handle = 0x7fff << 16
	// MaxQueues is the most transmit queues shaperd puts a tree under:
	// queue majors 1..MaxQueues stay clear of MQHandle.
	MaxQueues = 1024
	// MaxMQUserLeaves is the most users whose classes get leaf qdiscs
	// under per-queue trees: the kernel's automatic qdisc handles (majors
	// 8000 to ffff), from which their leaves are named, hold 32,767, for
	// these and the default classes of up to MaxQueues queues. More users
	// keep the kernel's default pfifo leaves, and so do the default classes.
	MaxMQUserLeaves = 31000
)

// queueMajors are the handle majors of the queues' HTB qdiscs, by queue:
// 1, 3, 4, ... skipping every major whose handle falls into bucket 0 of the
// kernel's per-device qdisc hash (qdisc_hash: 16 buckets, hash_32(handle,
// 4)). Bucket 0 holds every HTB class's default pfifo leaf (handle 0,
// invisible): every tc request naming a qdisc in that bucket (each filter
// and class write under it) walks all of them, 10 ms per request at
// 100,000 classes measured, against 0.2-0.5 ms in another bucket (see
// docs/queues-mq.md). The single tree's root 1: is found before the hash.
var queueMajors = func() []uint16 {
	out := make([]uint16, 0, MaxQueues)
	for m := uint32(1); len(out) < MaxQueues; m++ {
		if uint16(m) == MQHandle.Major() || qdiscHashBucket(m<<16) == 0 {
			continue
		}
		out = append(out, uint16(m))
	}
	return out
}()

// qdiscHashBucket is the kernel's bucket of handle in a device's qdisc
// hash: hash_min(handle, 4) = hash_32(handle, 4) (include/linux/hash.h).
func qdiscHashBucket(handle uint32) uint32 { return (handle * 0x61C88647) >> 28 }

// QueueHandle returns the handle of queue q's HTB qdisc. The first queue's
// tree is 1:, like the single tree; later queues skip the majors that share
// the kernel's qdisc hash bucket with HTB's default leaves (queueMajors).
func QueueHandle(q int) Handle { return MakeHandle(queueMajors[q], 0) }

// QueueParent returns mq's class of queue q, the parent of its HTB qdisc.
func QueueParent(q int) Handle { return MakeHandle(MQHandle.Major(), uint16(q+1)) }

// QueueOf returns the queue (0-based) whose tree holds class or qdisc h of
// a per-queue tree, or -1 when h's major is no queue's.
func QueueOf(h Handle) int {
	q, ok := slices.BinarySearch(queueMajors, h.Major())
	if !ok {
		return -1
	}
	return q
}

// QueueTarget is the root class of one queue's tree: the share of the
// interface bandwidth the queue may use now (RebalanceQueues).
type QueueTarget struct {
	Rate, Ceil tbf.Rate
}

// EvenQueueTargets splits bandwidth evenly over n queues, rate = ceil =
// bandwidth/n (at least 8 bit/s each): the sum never exceeds the bandwidth.
func EvenQueueTargets(bandwidth tbf.Rate, n int) []QueueTarget {
	out := make([]QueueTarget, n)
	share := max(bandwidth/tbf.Rate(n), 8)
	for i := range out {
		out[i] = QueueTarget{Rate: share, Ceil: share}
	}
	return out
}

// queueState is the queue part of an Assignment: which queue each user's
// class lives in, and one class-id Assignment per queue.
type queueState struct {
	n   int
	of  map[string]int
	ids []*Assignment
	// load and count are each queue's guaranteed rate and users at the
	// last AssignQueues, plus the users PlaceUser put there since (nil
	// before the first AssignQueues).
	load  []tbf.Rate
	count []int
}

func newQueueState(n int) *queueState {
	q := &queueState{n: n, of: map[string]int{}, ids: make([]*Assignment, n)}
	for i := range q.ids {
		q.ids[i] = NewAssignment()
	}
	return q
}

func (q *queueState) clone() *queueState {
	c := &queueState{n: q.n, of: make(map[string]int, len(q.of)), ids: make([]*Assignment, q.n)}
	for k, v := range q.of {
		c.of[k] = v
	}
	for i, a := range q.ids {
		c.ids[i] = a.Clone()
	}
	c.load, c.count = slices.Clone(q.load), slices.Clone(q.count)
	return c
}

// Queue returns the queue (0-based) user was assigned to by the last
// AssignQueues.
func (a *Assignment) Queue(user string) (int, bool) {
	if a.queues == nil {
		return 0, false
	}
	q, ok := a.queues.of[user]
	return q, ok
}

// QueueIDs returns the class-id Assignment of queue q's tree, or nil when
// the Assignment has no queue q.
func (a *Assignment) QueueIDs(q int) *Assignment {
	if a.queues == nil || q < 0 || q >= a.queues.n {
		return nil
	}
	return a.queues.ids[q]
}

// QueueCount is the number of queues of the last AssignQueues (0: none).
func (a *Assignment) QueueCount() int {
	if a.queues == nil {
		return 0
	}
	return a.queues.n
}

// AssignQueues puts every user on one of n queues, balanced by guaranteed
// rate and stable: a user that already has a queue keeps it (a new user
// never moves anyone), users no longer listed are released, and new users
// are placed, the fastest first (then by name), each on the queue with the
// least guaranteed rate so far (then the fewest users, then the lowest
// index). A different n starts over: every user is placed afresh. rates
// gives each user's guaranteed rate; names without a rate count as 0.
func (a *Assignment) AssignQueues(n int, rates map[string]tbf.Rate) {
	if a.queues == nil || a.queues.n != n {
		a.queues = newQueueState(n)
	}
	qs := a.queues
	load := make([]tbf.Rate, n)
	count := make([]int, n)
	for u, q := range qs.of {
		r, ok := rates[u]
		if !ok {
			delete(qs.of, u)
			continue
		}
		load[q] += r
		count[q]++
	}
	var fresh []string
	for u := range rates {
		if _, ok := qs.of[u]; !ok {
			fresh = append(fresh, u)
		}
	}
	slices.SortFunc(fresh, func(x, y string) int {
		if c := cmp.Compare(rates[y], rates[x]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	for _, u := range fresh {
		best := 0
		for q := 1; q < n; q++ {
			if load[q] < load[best] || load[q] == load[best] && count[q] < count[best] {
				best = q
			}
		}
		qs.of[u] = best
		load[best] += rates[u]
		count[best]++
	}
	qs.load, qs.count = load, count
}

// PlaceUser puts user, with guaranteed rate, on a queue as AssignQueues
// would (the one with the least guaranteed rate so far, then the fewest
// users, then the lowest index), moving nobody, and returns it; a user
// already placed keeps its queue. The loads are the last AssignQueues'
// plus the users placed since. False when the Assignment has no queues.
// It is the one-user form of AssignQueues, for adding a user without
// building the whole tree.
func (a *Assignment) PlaceUser(user string, rate tbf.Rate) (int, bool) {
	qs := a.queues
	if qs == nil {
		return 0, false
	}
	if q, ok := qs.of[user]; ok {
		return q, true
	}
	if len(qs.load) != qs.n {
		qs.load, qs.count = make([]tbf.Rate, qs.n), make([]int, qs.n)
		for _, q := range qs.of {
			qs.count[q]++
		}
	}
	best := 0
	for q := 1; q < qs.n; q++ {
		if qs.load[q] < qs.load[best] || qs.load[q] == qs.load[best] && qs.count[q] < qs.count[best] {
			best = q
		}
	}
	qs.of[user] = best
	qs.load[best] += rate
	qs.count[best]++
	return best, true
}

// SetQueue puts user on queue q of n (starting the queue part afresh when
// the Assignment has another queue count), as a recovered or known
// placement. It fails when q is not one of the n queues.
func (a *Assignment) SetQueue(user string, n, q int) error {
	if n < 2 || n > MaxQueues || q < 0 || q >= n {
		return fmt.Errorf("user %q: queue %d of %d", user, q, n)
	}
	a.UseQueues(n)
	a.queues.of[user] = q
	return nil
}

// UseQueues gives the Assignment n queues (2..MaxQueues), each with an
// empty class-id Assignment, unless it has n already. Out of range: no
// change.
func (a *Assignment) UseQueues(n int) {
	if n >= 2 && n <= MaxQueues && (a.queues == nil || a.queues.n != n) {
		a.queues = newQueueState(n)
	}
}

// queueJSON is the state-file form of the queue part of an Assignment.
type queueJSON struct {
	N     int               `json:"n"`
	Of    map[string]int    `json:"of"`
	Trees []*assignmentJSON `json:"trees"`
}

func (q *queueState) toJSON() *queueJSON {
	j := &queueJSON{N: q.n, Of: q.of, Trees: make([]*assignmentJSON, q.n)}
	for i, a := range q.ids {
		j.Trees[i] = &assignmentJSON{Users: a.u().byName, Tiers: a.t().byName, NextUser: a.u().next, NextTier: a.t().next}
	}
	return j
}

func queueStateFromJSON(j *queueJSON) (*queueState, error) {
	if j.N < 2 || j.N > MaxQueues || len(j.Trees) != j.N {
		return nil, fmt.Errorf("queues: %d queues with %d trees", j.N, len(j.Trees))
	}
	q := newQueueState(j.N)
	for u, n := range j.Of {
		if n < 0 || n >= j.N {
			return nil, fmt.Errorf("queues: user %q on queue %d of %d", u, n, j.N)
		}
		q.of[u] = n
	}
	for i, t := range j.Trees {
		if t == nil {
			continue
		}
		a, err := assignmentFromJSON(*t)
		if err != nil {
			return nil, fmt.Errorf("queue %d: %w", i, err)
		}
		q.ids[i] = a
	}
	return q, nil
}
