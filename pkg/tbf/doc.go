// Package tbf holds the token-bucket arithmetic that shaperd shares with the
// Linux kernel and a userspace token-bucket limiter.
//
// The kernel side reproduces the TBF and HTB qdiscs' psched arithmetic
// exactly: rates in bits/s ([Rate]) and sizes in bytes ([Size]) as tc writes
// them, bytes <-> time conversions, burst/buffer sizes in psched ticks
// (64 ns) and the kernel's rate mult/shift precomputation, so that the rest of
// shaperd can predict and explain what the kernel does.
//
// The userspace side is [Bucket], a goroutine-safe token bucket measured in
// tokens and tokens/s (the caller decides what a token is: a byte, a packet,
// a request). It supports smooth rate changes ([Bucket.SetRateSmooth]),
// linear ramps ([Bucket.Ramp]) and blocking waits ([Bucket.Wait]), and takes
// its time from an injectable [Clock] so that every behaviour can be tested
// without sleeping.
//
// The package imports the standard library only.
package tbf
