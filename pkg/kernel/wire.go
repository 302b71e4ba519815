package kernel

import (
	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// framedRatespec is the rate spec of a rate of bps bytes/s on a link with
// framing f (overhead, mpu, link layer Ethernet or ATM). A negative
// overhead is not the rate spec's (the root qdisc's size table carries
// it): it is sent as 0.
func framedRatespec(f psched.Framing, bps uint64) tcwire.Ratespec {
	f = f.RateSpec()
	return tcwire.Ratespec{Linklayer: uint8(f.LinkLayer()), Overhead: uint16(f.Overhead), MPU: f.MPU, Rate: tcwire.Rate32(bps)}
}

// ratespecFraming is the link framing a dumped rate spec carries.
func ratespecFraming(r tcwire.Ratespec) psched.Framing {
	return psched.Framing{Overhead: int(r.Overhead), MPU: r.MPU, ATM: r.Linklayer == uint8(psched.LinkLayerATM)}
}
