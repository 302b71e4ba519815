// Package tbf holds shaperd's units and a userspace token-bucket limiter.
//
// The units are rates in bits/s ([Rate]) and sizes in bytes ([Size]) as tc
// writes them ("10mbit", "64kb"; [ParseRate], [ParseSize]). In those units
// it sizes the kernel's buckets: shaperd's default burst for a rate
// ([RecommendedBurst]), the largest burst HTB can hold ([MaxBurst]), and
// the psched ticks a burst takes ([BufferTicks], [BurstFromTicks]). The
// kernel's own arithmetic behind them (psched ticks, rate configs, the TBF
// and HTB token steps, framing) is the subpackage psched.
//
// The limiter is [Bucket], a goroutine-safe token bucket measured in
// tokens and tokens/s (the caller decides what a token is: a byte, a packet,
// a request). It supports smooth rate changes ([Bucket.SetRateSmooth]),
// linear ramps ([Bucket.Ramp]) and blocking waits ([Bucket.Wait]), and takes
// its time from an injectable [Clock] so that every behaviour can be tested
// without sleeping.
//
// The package imports the standard library and psched only.
package tbf
