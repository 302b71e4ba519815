package kernel

import (
	"errors"
	"fmt"

	vnl "github.com/vishvananda/netlink"
)

// DeviceTxQueues returns the number of transmit queues of device in the
// calling process's network namespace, for `shaperd --check`; a missing
// device wraps ErrNoDevice.
func DeviceTxQueues(device string) (int, error) {
	l, err := vnl.LinkByName(device)
	if err != nil {
		var nf vnl.LinkNotFoundError
		if errors.As(err, &nf) {
			return 0, fmt.Errorf("%s: %w", device, ErrNoDevice)
		}
		return 0, fmt.Errorf("%s: %w", device, err)
	}
	return l.Attrs().NumTxQueues, nil
}
