// Package psched is the Linux kernel packet scheduler's token-bucket
// arithmetic, reproduced exactly so that shaperd can predict and explain
// what the kernel's TBF and HTB qdiscs do with what it installs.
//
// It works in the kernel's units: rates in bytes/s, sizes in bytes, times
// in ns and psched ticks (64 ns). It covers
//
//   - the psched clock: ticks <-> ns ([TicksToNS], [NSToTicks]) and tc's
//     bytes <-> ticks conversions ([XmitTime], [XmitSize], and the legacy
//     rounding of iproute2 < 6.15);
//   - struct psched_ratecfg ([RateConfig]): the rate's mult/shift
//     precomputation, bytes -> ns ([RateConfig.L2T]) and ns -> bytes
//     ([RateConfig.T2L]) with the kernel's u64 wrap;
//   - a link's per-packet accounting ([Framing]: overhead, mpu, ATM cells);
//   - the per-packet token steps of TBF ([TBFTokens]) and HTB ([HTBTokens],
//     [HTBClassMode]), and what tbf_change derives ([TBFBuffer]);
//   - tc's and HTB's defaults: the default HTB burst ([HTBDefaultBurst]),
//     the quantum ([HTBQuantum]) and the largest burst a u32 tick field
//     holds ([MaxBurst]).
//
// shaperd's units (tbf.Rate in bits/s, tbf.Size in bytes) and its burst
// sizing in those units (tbf.RecommendedBurst, tbf.BufferTicks) are in the
// parent package tbf, which builds on this one. The package imports the
// standard library only.
package psched
