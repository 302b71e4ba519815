package model

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// TBF defaults and limits Build applies.
const (
	// DefaultTBFLatency is how long a full TBF queue takes to drain when
	// InterfaceSpec.Latency is 0: limit = rate*latency + burst.
	DefaultTBFLatency = 50 * time.Millisecond
	// MaxFrame is the largest Ethernet frame without FCS at a 1500-byte MTU.
	// A TBF burst (its max_size) smaller than this would drop full-size
	// packets, so Build refuses it; it is also the default peak-bucket MTU.
	MaxFrame tbf.Size = 1514
	// maxTBFBufferNs is the kernel's cap on TBF's buffer and mtu (u32 ns,
	// ~4.29 s); a longer bucket would be silently cut.
	maxTBFBufferNs = math.MaxUint32
	// psched tick in ns.
	pschedTickNs = 64
)

// buildTBF makes the root TBF qdisc of a whole-link shaper.
func buildTBF(spec InterfaceSpec) (*Qdisc, error) {
	rate := spec.Bandwidth
	burst := spec.Burst
	if burst == 0 {
		burst = max(tbf.RecommendedBurst(rate), MaxFrame)
	}
	if burst < MaxFrame {
		return nil, &FieldError{"burst", fmt.Errorf("tbf burst %s is smaller than one %s frame: full-size packets would be dropped", burst, MaxFrame)}
	}
	if err := checkTBFBucket("burst", rate, burst); err != nil {
		return nil, &FieldError{"burst", err}
	}
	latency := spec.Latency
	if latency == 0 {
		latency = DefaultTBFLatency
	}
	if latency < 0 {
		return nil, &FieldError{"latency", fmt.Errorf("tbf latency %v is negative", latency)}
	}
	hi, lo := bits.Mul64(rate.BytesPerSecond(), uint64(latency))
	if hi >= uint64(time.Second) {
		return nil, &FieldError{"latency", fmt.Errorf("tbf limit for rate %s and latency %v: %w", rate, latency, tbf.ErrOverflow)}
	}
	queued, _ := bits.Div64(hi, lo, uint64(time.Second))
	limit := queued + uint64(burst)
	if limit > math.MaxUint32 || limit < queued {
		return nil, &FieldError{"latency", fmt.Errorf("tbf limit %s (rate %s * latency %v + burst %s) exceeds the kernel's 32-bit limit",
			tbf.Size(limit), rate, latency, burst)}
	}
	p := &TBFParams{Rate: rate, Burst: burst, Limit: tbf.Size(limit), Framing: spec.Framing.RateSpec()}
	if spec.PeakRate != 0 {
		if spec.PeakRate.BytesPerSecond() <= rate.BytesPerSecond() {
			return nil, &FieldError{"peakrate", fmt.Errorf("tbf peak rate %s must be above the rate %s (in whole bytes per second)", spec.PeakRate, rate)}
		}
		mtu := spec.MTU
		if mtu == 0 {
			mtu = MaxFrame
		}
		if err := checkTBFBucket("mtu", spec.PeakRate, mtu); err != nil {
			return nil, &FieldError{"mtu", err}
		}
		p.PeakRate, p.MTU = spec.PeakRate, mtu
	}
	return &Qdisc{Kind: ShaperTBF, Handle: RootQdisc, TBF: p, SizeOverhead: spec.Framing.SizeTableOverhead()}, nil
}

// checkTBFBucket refuses a bucket the kernel cannot hold: more than u32
// ticks, more than u32 nanoseconds (TBF caps buffer and mtu there) or more
// than u32 bytes (TCA_TBF_BURST/PBURST).
func checkTBFBucket(what string, rate tbf.Rate, size tbf.Size) error {
	if size > math.MaxUint32 {
		return fmt.Errorf("tbf %s %s does not fit the kernel's 32-bit byte field", what, size)
	}
	ticks, err := tbf.BufferTicks(rate, size)
	if err != nil {
		return fmt.Errorf("tbf %s %s at %s: %w", what, size, rate, err)
	}
	if uint64(ticks)*pschedTickNs > maxTBFBufferNs {
		return fmt.Errorf("tbf %s %s at %s lasts more than the kernel's limit of 4.29s", what, size, rate)
	}
	return nil
}

// FieldError is a Build error caused by one field of the InterfaceSpec:
// Field is the config key's name ("bandwidth", "burst", "latency",
// "peakrate", "mtu"), so a configuration check can point at the key. Its
// message is Err's.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }
