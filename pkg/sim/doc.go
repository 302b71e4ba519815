// Package sim is shaperd's plan simulator: for a model.Tree (what shaperd
// would install on one device) and a demand per class, it predicts the rate
// the kernel lets each class send in steady state, in bits per second as the
// kernel counts them (the bytes of the frames through the class, link-layer
// header included, FCS excluded), and says what limits each class.
//
// The HTB solver follows sch_htb.c's rules rather than the tc manual:
//
//   - A leaf class that has rate tokens sends at level 0 without asking any
//     ancestor: every backlogged leaf gets min(demand, rate) even when the
//     guaranteed rates of siblings add up to more than their parent (or the
//     whole interface). The parent's tokens and ctokens are charged and go
//     negative, so it lends nothing, but it never stops the leaves.
//   - Spare bandwidth is lent level by level, lowest level first: an inner
//     class lends rate - (traffic charged to its rate tokens), and only while
//     the traffic through it is below its ceil. Traffic it lends is charged
//     to its own and its ancestors' rate tokens, not to the borrower's.
//   - A borrower is reachable when it and every class between it and the
//     lender are below their ceil (not CANT_SEND).
//   - Within one lender, lower prio numbers are served first until they are
//     satisfied; within one prio level the spare is shared by deficit round
//     robin, i.e. in proportion to the leaves' quanta. HTB's DRR walks the
//     feed tree so that every active leaf below the lender gets one quantum
//     per round, so the share is flat over leaves, not divided per subtree.
//   - A class without an explicit quantum gets the kernel default
//     rate/r2q (r2q 10) clamped to 1000..200000 bytes (psched.HTBQuantum).
//   - DRR ends a class's turn only after the packet that overdraws its
//     deficit, so a class sends max(quantum, packet) bytes per round;
//     Options.PacketSize says how big the dequeued packets are (GSO/GRO
//     aggregates count as one).
//
// A TBF root's total is min(demand, rate). Its split among the flows given
// is the max-min fair one (ByFIFO): a FIFO behind a token bucket has no
// classes and guarantees no split. Solve models no bursts, peak rates or
// transients; the physical link is assumed to be faster than the shaper.
// The steady state holds when bursts and cbursts are several packets
// long: a class whose cburst is about one (GSO) packet falls short of its
// ceil (see docs/simulator.md for measurements).
//
// Run is the second fidelity: a packet-level, event-driven simulation in
// the kernel's nanoseconds over a schedule of events (new class or TBF
// parameters, new demands), for transients: a burst after idle, a
// set-rate ramp's steps, a schedule boundary. It keeps each class's tokens
// and ctokens as sch_htb.c does (pkg/tbf: buffers from psched ticks, l2t
// with the rate's mult/shift, the 60 s floor, tokens kept on a change) and
// a TBF's as sch_tbf.c does (refilled to the full burst on every change),
// dequeues in HTB's order (level, then prio, then DRR by quantum among
// the leaves a lender serves) and reports each class's bytes per window.
package sim
