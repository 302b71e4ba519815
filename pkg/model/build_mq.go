package model

import (
	"fmt"
	"slices"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// buildMQ builds per-queue trees (spec.Queues > 1): an mq root and, per
// queue, an HTB qdisc with the single tree's layout. Users are placed on
// queues by ids.AssignQueues (stable, balanced by guaranteed rate) and
// get minors from their queue's own Assignment, so an interface holds up to
// Queues*MaxUsers users. Tier classes exist in the queues the tier has
// users in, each with the tier's rate split by the guaranteed rates of its
// users there and the tier's ceil. The queues' root classes take
// t.Queues (default EvenQueueTargets); the default class of each queue
// gets DefaultRate/Queues and DefaultCeil.
//
// Leaf qdiscs are refused: their handles (the class minor as major) would
// collide between queue trees.
func buildMQ(tree *Tree, t Targets, ids *Assignment) error {
	spec := t.Interface
	n := spec.Queues
	if n > MaxQueues {
		return &FieldError{"queues", fmt.Errorf("%d queues: at most %d", n, MaxQueues)}
	}
	match, err := matchOf(spec)
	if err != nil {
		return err
	}
	if spec.Leaf != nil {
		return &FieldError{"leaf", fmt.Errorf("leaf qdiscs are not supported with queues = %d (their handles would collide between queue trees)", n)}
	}
	for _, u := range t.Users {
		if u.Leaf != nil {
			return fmt.Errorf("user %s: leaf qdiscs are not supported with queues = %d", u.Name, n)
		}
	}
	tiers, tierNames, err := tierClasses(t.Tiers)
	if err != nil {
		return err
	}
	users, userNames, err := userClasses(t.Users, nil)
	if err != nil {
		return err
	}
	filters, err := userFilters(t.Users, match)
	if err != nil {
		return err
	}
	if len(tierNames) > MaxTiers {
		return fmt.Errorf("%d tiers with an aggregate class: %w: at most %d", len(tierNames), ErrTooManyTiers, MaxTiers)
	}
	if len(userNames) > n*MaxUsers {
		return fmt.Errorf("%d users: %w: %d queues hold at most %d user classes", len(userNames), ErrTooManyUsers, n, n*MaxUsers)
	}
	if ids == nil {
		ids = NewAssignment()
	}
	rates := make(map[string]tbf.Rate, len(users))
	for _, c := range users {
		rates[c.Labels.User] = c.Rate
	}
	work := ids.Clone() // ids stays unchanged on error
	work.AssignQueues(n, rates)
	perQueue := make([][]string, n)
	for _, u := range userNames {
		q, _ := work.Queue(u)
		perQueue[q] = append(perQueue[q], u)
	}
	// The tier's guaranteed rate per queue, split by its users' rates.
	tierIn := make([]map[string]tbf.Rate, n)
	tierAll := map[string]tbf.Rate{}
	for q := range tierIn {
		tierIn[q] = map[string]tbf.Rate{}
	}
	for _, c := range users {
		q, _ := work.Queue(c.Labels.User)
		tierIn[q][c.Labels.Tier] += c.Rate
		tierAll[c.Labels.Tier] += c.Rate
	}
	for q := 0; q < n; q++ {
		if len(perQueue[q]) > MaxUsers {
			return fmt.Errorf("queue %d: %d users: %w: a queue holds at most %d", q, len(perQueue[q]), ErrTooManyUsers, MaxUsers)
		}
		var ts []string
		for _, name := range tierNames {
			if _, ok := tierIn[q][name]; ok {
				ts = append(ts, name)
			}
		}
		if err := work.QueueIDs(q).AssignTiers(ts); err != nil {
			return fmt.Errorf("queue %d: %w", q, err)
		}
		if err := work.QueueIDs(q).Assign(perQueue[q]); err != nil {
			return fmt.Errorf("queue %d: %w", q, err)
		}
	}

	qt := t.Queues
	if len(qt) != n {
		qt = EvenQueueTargets(spec.Bandwidth, n)
	}
	defRate, defCeil := spec.DefaultRate, spec.DefaultCeil
	if defRate == 0 {
		defRate = DefaultClassRate(spec.Bandwidth)
	}
	if defCeil == 0 {
		defCeil = spec.Bandwidth
	}
	rs := spec.Framing.RateSpec()
	classes := make([]Class, 0, n*2+len(users)+len(tiers))
	queues := make([]Qdisc, n)
	tierHandle := make([]map[string]Handle, n)
	for q := 0; q < n; q++ {
		major := QueueHandle(q).Major()
		queues[q] = Qdisc{Kind: ShaperHTB, Handle: QueueHandle(q), Parent: QueueParent(q),
			DefaultMinor: DefaultClass.Minor(), SizeOverhead: spec.Framing.SizeTableOverhead()}
		root, err := makeClass(classSpec{rate: qt[q].Rate, ceil: qt[q].Ceil}, nil, Labels{Kind: "root"})
		if err != nil {
			return fmt.Errorf("queue %d: root class: %w", q, err)
		}
		root.Handle, root.Parent, root.Framing = MakeHandle(major, RootClass.Minor()), QueueHandle(q), rs
		def, err := makeClass(classSpec{rate: max(defRate/tbf.Rate(n), 8), ceil: defCeil}, nil, Labels{Kind: "default"})
		if err != nil {
			return fmt.Errorf("queue %d: default class: %w", q, err)
		}
		def.Handle, def.Parent, def.Framing = MakeHandle(major, DefaultClass.Minor()), root.Handle, rs
		classes = append(classes, root, def)
		tierHandle[q] = map[string]Handle{}
		for _, c := range tiers {
			name := c.Labels.Tier
			in, ok := tierIn[q][name]
			if !ok {
				continue
			}
			share := 1 / float64(n)
			if all := tierAll[name]; all > 0 {
				share = float64(in) / float64(all)
			}
			tc, err := makeClass(classSpec{rate: max(tbf.Rate(float64(c.Rate)*share), 8), ceil: c.Ceil, burst: c.Burst, cburst: c.CBurst}, nil, c.Labels)
			if err != nil {
				return fmt.Errorf("queue %d: tier %s: %w", q, name, err)
			}
			m, _ := work.QueueIDs(q).Tier(name)
			tc.Handle, tc.Parent, tc.Framing = MakeHandle(major, m), root.Handle, rs
			tierHandle[q][name] = tc.Handle
			classes = append(classes, tc)
		}
	}
	userHandle := make([]Handle, len(users))
	for i, c := range users {
		q, _ := work.Queue(c.Labels.User)
		m, _ := work.QueueIDs(q).User(c.Labels.User)
		c.Handle, c.Parent, c.Framing = MakeHandle(QueueHandle(q).Major(), m), MakeHandle(QueueHandle(q).Major(), RootClass.Minor()), rs
		if h, ok := tierHandle[q][c.Labels.Tier]; ok {
			c.Parent = h
		}
		userHandle[i] = c.Handle
		classes = append(classes, c)
	}
	for i := range filters {
		u := int(filters[i].ClassID) // the user's index, see userFilters
		filters[i].ClassID, filters[i].Labels = userHandle[u], users[u].Labels
	}
	*ids = *work
	tree.Root = &Qdisc{Kind: ShaperMQ, Handle: MQHandle}
	tree.Queues = queues
	slices.SortFunc(classes, CompareClasses)
	tree.Classes = classes
	tree.Filters = filters
	return nil
}
