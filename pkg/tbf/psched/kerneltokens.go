package psched

// The kernel's per-packet token decisions, in ns of transmission time at a
// rate, for pkg/sim's simulator. Each function is one step of the kernel's
// algorithm, exact to the integer; the caller keeps the state (tokens, t_c).

// TBFTokens is tbf_dequeue's decision for the rate bucket (sch_tbf.c), with
// tokens and buffer in ns, elapsedNS = now - t_c, and l2tNS = L2T(packet len):
//
//	toks = min(elapsed, buffer)
//	toks = min(toks + tokens, buffer) - l2t
//	send when toks >= 0
//
// When ok, the kernel sets tokens = newTokens and t_c = now. When not ok it
// keeps tokens and t_c unchanged and arms its watchdog for now + -newTokens:
// the deficit in ns. With a peak rate the kernel runs the same steps on
// ptokens with mtu as the depth (and l2t at the peak rate), sends only when
// both are >= 0, and waits for the larger deficit.
func TBFTokens(tokensNS, bufferNS, elapsedNS, l2tNS int64) (newTokens int64, ok bool) {
	toks := min(elapsedNS, bufferNS)
	toks = min(toks+tokensNS, bufferNS) - l2tNS
	return toks, toks >= 0
}

// HTBMaxBufferNS is HTB's mbuffer: 60 s. Elapsed time is capped at it and
// tokens never fall to -mbuffer or below.
const HTBMaxBufferNS int64 = 60 * NanosPerSecond

// HTBTokens is htb_accnt_tokens / htb_accnt_ctokens (sch_htb.c): charge a
// packet costing l2tNS to a bucket of depth bufferNS holding tokensNS, when
// elapsedNS = now - t_c passed since the class's last charge:
//
//	diff = min(elapsed, mbuffer)
//	toks = min(diff + tokens, buffer) - l2t
//	if toks <= -mbuffer { toks = 1 - mbuffer }
//
// The kernel uses it for ctokens (ceil) of the leaf and every ancestor, and
// for tokens (rate) of the classes at or above the level the packet was sent
// from; lower (borrowing) classes get tokens += diff uncapped instead.
func HTBTokens(tokensNS, bufferNS, elapsedNS, l2tNS int64) int64 {
	diff := min(elapsedNS, HTBMaxBufferNS)
	toks := min(diff+tokensNS, bufferNS) - l2tNS
	if toks <= -HTBMaxBufferNS {
		toks = 1 - HTBMaxBufferNS
	}
	return toks
}

// HTBMode is an HTB class's mode (enum htb_cmode).
type HTBMode int

// HTB class modes.
const (
	HTBCantSend  HTBMode = 0 // HTB_CANT_SEND: ctokens < 0, over its ceil
	HTBMayBorrow HTBMode = 1 // HTB_MAY_BORROW: over its rate, may borrow from ancestors
	HTBCanSend   HTBMode = 2 // HTB_CAN_SEND: within its rate
)

// String returns the kernel's name of the mode.
func (m HTBMode) String() string {
	switch m {
	case HTBCantSend:
		return "cant_send"
	case HTBMayBorrow:
		return "may_borrow"
	case HTBCanSend:
		return "can_send"
	}
	return "unknown"
}

// HTBClassMode is htb_class_mode with the default htb_hysteresis = 0: the
// class's mode diffNS after its t_c, and for a mode other than CAN_SEND the
// ns until it changes (the kernel's pq_key delay):
//
//	ctokens + diff < 0  -> CANT_SEND, wait -(ctokens+diff)
//	tokens + diff >= 0  -> CAN_SEND
//	otherwise           -> MAY_BORROW, wait -(tokens+diff)
func HTBClassMode(tokensNS, ctokensNS, diffNS int64) (mode HTBMode, waitNS int64) {
	if t := ctokensNS + diffNS; t < 0 {
		return HTBCantSend, -t
	}
	t := tokensNS + diffNS
	if t >= 0 {
		return HTBCanSend, 0
	}
	return HTBMayBorrow, -t
}
