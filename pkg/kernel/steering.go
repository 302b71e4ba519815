package kernel

import (
	"fmt"
	"net/netip"

	"github.com/shaperd/shaperd/pkg/kernel/steer"
	"github.com/shaperd/shaperd/pkg/model"
)

// steererFor returns the queue steering program of device ifi (per-queue
// trees under mq), loading and attaching it at the device's clsact egress
// on first use; matchSrc steers by source address (an IFB device). The
// program keeps steering after shaperd exits (the filter holds it); a new
// process loads a new one with fresh maps, which Dump fills from the
// per-queue classifiers (see syncSteering).
func (k *Kernel) steererFor(ifi uint32, matchSrc bool) (*steer.Steerer, bool, error) {
	if s, ok := k.steerers[ifi]; ok {
		return s, false, nil
	}
	s, err := steer.New(k.link, int(ifi), matchSrc, 0)
	if err != nil {
		return nil, false, err
	}
	if err := s.Attach(); err != nil {
		s.Close()
		return nil, false, err
	}
	k.steerers[ifi] = s
	return s, true, nil
}

// forgetSteerer drops (and detaches) the steering program of a device
// whose mq root was deleted.
func (k *Kernel) forgetSteerer(ifi uint32) {
	s, ok := k.steerers[ifi]
	if !ok {
		return
	}
	_ = s.Detach()
	_ = s.Close()
	delete(k.steerers, ifi)
}

// steerFilter points the steering map entry of filter f at the queue of
// its class (add) or removes it (delete).
func (k *Kernel) steerFilter(ifi uint32, op model.Op, f *model.Filter) error {
	s, _, err := k.steererFor(ifi, f.Match == model.MatchSrc)
	if err != nil {
		return err
	}
	if op == model.OpDelete {
		return s.Delete(f.Prefix)
	}
	q := model.QueueOf(f.ClassID)
	if q < 0 {
		return fmt.Errorf("class %s is in no queue's tree", f.ClassID)
	}
	return s.Set(f.Prefix, uint32(q))
}

// syncSteering makes the steering maps of device ifi hold exactly the
// prefixes of filters, each on its class's queue, and returns how many
// entries it wrote (map updates, not tc writes). A process that has not
// steered the device yet loads the program and fills its maps here: this
// is how a restart adopts the steering without a tc write.
func (k *Kernel) syncSteering(ifi uint32, device string, filters []model.Filter) (int, error) {
	if len(filters) == 0 {
		if _, ok := k.steerers[ifi]; !ok {
			return 0, nil
		}
	}
	matchSrc := len(filters) > 0 && filters[0].Match == model.MatchSrc
	s, _, err := k.steererFor(ifi, matchSrc)
	if err != nil {
		return 0, fmt.Errorf("steering of %s: %w", device, err)
	}
	have, err := s.List()
	if err != nil {
		return 0, fmt.Errorf("steering of %s: %w", device, err)
	}
	writes := 0
	want := make(map[netip.Prefix]bool, len(filters))
	for _, f := range filters {
		q := uint32(model.QueueOf(f.ClassID))
		want[f.Prefix] = true
		if got, ok := have[f.Prefix]; ok && got == q {
			continue
		}
		if err := s.Set(f.Prefix, q); err != nil {
			return writes, fmt.Errorf("steering of %s: %w", device, err)
		}
		writes++
	}
	for p := range have {
		if !want[p] {
			if err := s.Delete(p); err != nil {
				return writes, fmt.Errorf("steering of %s: %w", device, err)
			}
			writes++
		}
	}
	return writes, nil
}
