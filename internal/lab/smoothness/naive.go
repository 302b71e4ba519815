package smoothness

import (
	"fmt"
	"strconv"

	"github.com/shaperd/shaperd/pkg/model"
)

// naiveArgs returns the tc command of the naive change to c.To on dev:
// for HTB `tc class change` of the user class cls with only the new rate
// (ceil = rate, tc's default burst and the kernel's default quantum), for
// TBF `tc qdisc change` of the root with the new rate and the burst and
// limit of to (the TBF parameters Build gives for c.To: tc's tbf has no
// default burst).
func naiveArgs(c Case, dev string, cls model.Class, to *model.TBFParams) ([]string, error) {
	rate := strconv.FormatUint(uint64(c.To), 10) + "bit"
	switch c.Shaper {
	case model.ShaperHTB:
		return []string{"tc", "class", "change", "dev", dev, "parent", cls.Parent.String(),
			"classid", cls.Handle.String(), "htb", "rate", rate}, nil
	case model.ShaperTBF:
		if to == nil {
			return nil, fmt.Errorf("case %s: no TBF parameters for the naive change", c)
		}
		return []string{"tc", "qdisc", "change", "dev", dev, "root", "handle", model.RootQdisc.String(),
			"tbf", "rate", rate, "burst", strconv.FormatUint(uint64(to.Burst), 10),
			"limit", strconv.FormatUint(uint64(to.Limit), 10)}, nil
	}
	return nil, fmt.Errorf("case %s: unknown shaper %q", c, c.Shaper)
}
