package migrate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shaperd/shaperd/pkg/config"
)

// colSQM is ShapedDevices.csv's optional per-circuit queue column:
// LibreQoS's own sqm setting for the circuit ("cake", "cake diffserv4",
// "fq_codel", "none"), or "DOWN/UP" for one per direction.
const colSQM = "sqm"

// SQM is a circuit's sqm cell as shaperd's user keys: Leaf is leaf_qdisc
// ("" for none given), Diffserv leaf_diffserv (cake's mode, "" for its
// default).
type SQM struct {
	Leaf, Diffserv string
}

// parseSQM reads an sqm cell. "none" (LibreQoS queues the circuit in a
// plain FIFO, no AQM) is bfifo, shaperd's FIFO sized for the rate. A
// shaperd user has one leaf queue for both directions, so "DOWN/UP" with
// two different queues is an error rather than half of it dropped.
func parseSQM(cell string) (SQM, error) {
	cell = strings.ToLower(strings.TrimSpace(cell))
	if cell == "" {
		return SQM{}, nil
	}
	if down, up, ok := strings.Cut(cell, "/"); ok {
		d, err := parseSQM(down)
		if err != nil {
			return SQM{}, err
		}
		u, err := parseSQM(up)
		if err != nil {
			return SQM{}, err
		}
		if d != u {
			return SQM{}, fmt.Errorf("%q has a download queue and another upload queue; a shaperd user has one leaf queue for both directions (leaf_qdisc): give one", cell)
		}
		return d, nil
	}
	f := strings.Fields(cell)
	switch {
	case len(f) == 1 && f[0] == "none":
		return SQM{Leaf: "bfifo"}, nil
	case len(f) == 1 && f[0] == "fq_codel":
		return SQM{Leaf: "fq_codel"}, nil
	case f[0] == "cake" && len(f) == 1:
		return SQM{Leaf: "cake"}, nil
	case f[0] == "cake" && len(f) == 2 && slices.Contains(config.CakeModes, f[1]):
		return SQM{Leaf: "cake", Diffserv: f[1]}, nil
	}
	return SQM{}, fmt.Errorf("%q is not a queue shaperd knows: cake (optionally with one of %s), fq_codel or none", cell, strings.Join(config.CakeModes, ", "))
}
