package policy

import (
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// predictTBF replays the kernel's TBF rate bucket (psched.TBFTokens with the
// kernel's L2T) for a sender that always has pkt-byte packets queued, from a
// change (tokens = buffer, the bucket full) for d, at rate with burst
// (TCA_TBF_BURST: buffer = L2T(burst)). It returns the bytes that leave in
// [0, d]: at most burst + rate*d, up to one packet of rounding.
func predictTBF(rate tbf.Rate, burst tbf.Size, d time.Duration, pkt int) uint64 {
	rc := psched.NewRateConfig(rate.BytesPerSecond(), 0, 0)
	buf := psched.TBFFromBurst(rc, uint32(min(burst, tbf.Size(^uint32(0)))))
	cost := int64(rc.L2T(pkt))
	if uint64(pkt) > buf.MaxSize || cost <= 0 {
		return 0 // dropped as oversize (or a degenerate rate)
	}
	var now, tc int64
	tokens, end := buf.BufferNS, d.Nanoseconds()
	var sent uint64
	for now <= end {
		toks, ok := psched.TBFTokens(tokens, buf.BufferNS, now-tc, cost)
		if !ok {
			now += -toks // the watchdog fires when the deficit is repaid
			continue
		}
		tokens, tc = toks, now
		sent += uint64(pkt)
	}
	return sent
}

// predictHTB replays one HTB leaf's rate bucket (psched.HTBTokens) for a
// sender that always has pkt-byte packets queued, starting with tokensNS
// (HTB keeps them across a change), at rate with burst, for d, without
// borrowing (ceil = rate). It returns the bytes sent and the tokens left.
func predictHTB(rate tbf.Rate, burst tbf.Size, tokensNS int64, d time.Duration, pkt int) (sent uint64, tokensLeft int64) {
	rc := psched.NewRateConfig(rate.BytesPerSecond(), 0, 0)
	ticks, err := tbf.BufferTicks(rate, burst)
	if err != nil {
		return 0, tokensNS
	}
	buffer := psched.TicksToNS(ticks)
	cost := int64(rc.L2T(pkt))
	tokens := min(tokensNS, buffer)
	var now, tc int64
	end := d.Nanoseconds()
	for now <= end {
		if mode, wait := psched.HTBClassMode(tokens, tokens, now-tc); mode != psched.HTBCanSend {
			now += max(wait, 1)
			continue
		}
		tokens = psched.HTBTokens(tokens, buffer, now-tc, cost)
		tc = now
		sent += uint64(pkt)
	}
	// Bring the tokens up to the end of the window, as the next charge would.
	tokens = min(tokens+end-tc, buffer)
	return sent, tokens
}
