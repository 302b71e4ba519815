package check

import (
	"errors"

	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
)

// checkQueues is the part of `shaperd --check` that needs the devices: an
// interface with queues = N needs a device (in this namespace) with at
// least N transmit queues and without XPS maps (which would override the
// steering). A device that does not exist yet is not checked.
func checkQueues(plan *config.Plan) []config.Error {
	var errs []config.Error
	for i := range plan.Interfaces {
		in := &plan.Interfaces[i]
		if in.Queues == 0 || in.Queues == 1 {
			continue
		}
		dev := in.Name
		if in.Direction == config.Ingress {
			dev = in.IFB
		}
		key := config.Path("interface", i, "queues")
		n, err := kernel.DeviceTxQueues(dev)
		if errors.Is(err, kernel.ErrNoDevice) {
			continue
		}
		if err != nil {
			errs = append(errs, plan.Errorf(key, "interface %s: %v", in.Name, err))
			continue
		}
		want := in.Queues
		if want == config.QueuesAuto {
			want = n
		}
		if want > n {
			errs = append(errs, plan.Errorf(key, "interface %s: queues = %d but device %s has %d transmit queues", in.Name, in.Queues, dev, n))
			continue
		}
		xps, err := kernel.XPSQueues(dev, want)
		if err != nil {
			errs = append(errs, plan.Errorf(key, "interface %s: %v", in.Name, err))
		} else if len(xps) > 0 {
			errs = append(errs, plan.Errorf(key, "interface %s: device %s has XPS maps on transmit queues %v, which override the per-queue steering: clear /sys/class/net/%s/queues/tx-N/xps_cpus", in.Name, dev, xps, dev))
		}
	}
	return errs
}
