package psched

import "testing"

func TestTBFTokens(t *testing.T) {
	// 10 Mbit, burst 1600 B: buffer = 1280000 ns; a 1514 B frame costs
	// 1514*800 = 1211200 ns.
	const buffer, frame = 1_280_000, 1_211_200
	tests := []struct {
		name                 string
		tokens, elapsed, l2t int64
		wantTokens           int64
		wantOK               bool
	}{
		// full bucket: min(0, buffer) + 1280000 -> 1280000 - 1211200 = 68800.
		{"full", buffer, 0, frame, 68_800, true},
		// right after: 68800 - 1211200 = -1142400: wait 1142400 ns.
		{"empty", 68_800, 0, frame, -1_142_400, false},
		// after exactly that wait the frame goes with 0 left.
		{"repaid", 68_800, 1_142_400, frame, 0, true},
		// one ns early it is still short by one.
		{"1ns early", 68_800, 1_142_399, frame, -1, false},
		// long idle: elapsed capped at buffer, sum capped at buffer.
		{"idle 10s", 68_800, 10_000_000_000, frame, 68_800, true},
		// a packet costing more than the whole buffer never goes (the
		// kernel's max_size keeps it out of the queue).
		{"too big", buffer, 10_000_000_000, buffer + 1, -1, false},
		// 64 B at 100 Gbit costs 5 ns.
		{"100gbit 64B", 0, 5, 5, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := TBFTokens(tt.tokens, buffer, tt.elapsed, tt.l2t)
			if got != tt.wantTokens || ok != tt.wantOK {
				t.Errorf("TBFTokens(%d, %d, %d, %d) = %d, %v, want %d, %v",
					tt.tokens, buffer, tt.elapsed, tt.l2t, got, ok, tt.wantTokens, tt.wantOK)
			}
		})
	}
}

// TestTBFTokensLongRun: back-to-back 1514 B frames through a 10 Mbit TBF
// leave at exactly the rate once the burst is spent; the kernel's step
// repeated with the watchdog's waits sends n frames in burst + n*l2t.
func TestTBFTokensLongRun(t *testing.T) {
	r := NewRateConfig(bps10Mbit, 0, 0)
	tb := TBFFromBurst(r, 1600)
	l2t := int64(r.L2T(1514))
	tokens, now, tc := tb.BufferNS, int64(0), int64(0)
	sent := 0
	for sent < 1000 {
		toks, ok := TBFTokens(tokens, tb.BufferNS, now-tc, l2t)
		if !ok {
			now += -toks // the watchdog fires when the deficit is repaid
			continue
		}
		tokens, tc = toks, now
		sent++
	}
	// the first frame leaves at 0 from the full bucket (68800 ns left);
	// every further frame needs 1211200 ns of new tokens minus that credit.
	if want := int64(999)*l2t - (tb.BufferNS - l2t); now != want {
		t.Errorf("1000 frames done at %d ns, want %d", now, want)
	}
}

func TestHTBTokens(t *testing.T) {
	const buffer, frame = 1_280_000, 1_211_200
	tests := []struct {
		name                 string
		tokens, elapsed, l2t int64
		want                 int64
	}{
		{"full", buffer, 0, frame, 68_800},
		{"borrowed below zero", 68_800, 0, frame, -1_142_400},
		{"elapsed capped at buffer", -1_142_400, 5_000_000, frame, 68_800},
		// floor: -59.9 s - 1 s = -60.9 s <= -60 s -> 1 - 60 s.
		{"floor", -59_900_000_000, 0, 1_000_000_000, 1 - 60_000_000_000},
		// exactly -60 s is also floored (<=).
		{"floor edge", -59_000_000_000, 0, 1_000_000_000, 1 - 60_000_000_000},
		{"just above floor", -59_000_000_000, 1, 1_000_000_000, -59_999_999_999},
		// elapsed capped at mbuffer = 60 s: 1-60s + 60s = 1, -l2t.
		{"mbuffer cap", 1 - 60_000_000_000, 100_000_000_000, frame, 1 - frame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HTBTokens(tt.tokens, buffer, tt.elapsed, tt.l2t); got != tt.want {
				t.Errorf("HTBTokens(%d, %d, %d, %d) = %d, want %d", tt.tokens, buffer, tt.elapsed, tt.l2t, got, tt.want)
			}
		})
	}
}

func TestHTBClassMode(t *testing.T) {
	tests := []struct {
		tokens, ctokens, diff int64
		mode                  HTBMode
		wait                  int64
	}{
		{10, 10, 0, HTBCanSend, 0},
		{0, 0, 0, HTBCanSend, 0},         // 0 is enough for both
		{-100, 50, 0, HTBMayBorrow, 100}, // over rate, under ceil
		{-100, 50, 100, HTBCanSend, 0},   // 100 ns later it can send
		{-100, -50, 20, HTBCantSend, 30}, // over ceil: wait for ctokens
		{100, -1, 0, HTBCantSend, 1},     // ceil wins over rate
	}
	for _, tt := range tests {
		mode, wait := HTBClassMode(tt.tokens, tt.ctokens, tt.diff)
		if mode != tt.mode || wait != tt.wait {
			t.Errorf("HTBClassMode(%d, %d, %d) = %s, %d, want %s, %d", tt.tokens, tt.ctokens, tt.diff, mode, wait, tt.mode, tt.wait)
		}
	}
	if HTBMode(7).String() != "unknown" || HTBMayBorrow.String() != "may_borrow" {
		t.Errorf("HTBMode strings: %q %q", HTBMode(7), HTBMayBorrow)
	}
}
