package kernel

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/shaperd/shaperd/pkg/kernel/bpfcls"
	"github.com/shaperd/shaperd/pkg/kernel/steer"
	"github.com/shaperd/shaperd/pkg/model"
)

// steererFor returns the queue steering program of device ifi (per-queue
// trees under mq); matchSrc steers by source address (an IFB device). On
// first use it adopts the one an earlier Steerer left (pinned in
// steerPinDir, or the program the attached filter runs: steer.Adopt), or
// loads a new one (created: its maps are empty), pins it when bpffs
// allows, and attaches it at the device's clsact egress unless the filter
// there runs it already. The program keeps steering after shaperd exits
// (the filter holds it); a restart adopts it and its maps without a tc
// write.
func (k *Kernel) steererFor(ifi uint32, matchSrc bool) (s *steer.Steerer, created bool, err error) {
	if s, ok := k.steerers[ifi]; ok {
		return s, false, nil
	}
	dir := ""
	if bpfcls.EnsureBPFFS(k.bpfPinRoot) == nil {
		dir = k.steerPinDir(ifi)
	}
	s = steer.Adopt(k.link, int(ifi), matchSrc, dir)
	if s == nil {
		if s, err = steer.New(k.link, int(ifi), matchSrc, 0); err != nil {
			return nil, false, err
		}
		created = true
	}
	if dir != "" {
		if err := s.Pin(dir); err != nil {
			s.Close()
			return nil, false, err
		}
	}
	on, err := s.Attached()
	if err == nil && !on {
		err = s.Attach()
	}
	if err != nil {
		s.Close()
		return nil, false, err
	}
	k.steerers[ifi] = s
	return s, created, nil
}

// steerPinDir is where the steering maps and program of device ifi are
// pinned: next to its classifiers' pins (bpfcls.PinDir), in
// ROOT/netns-INODE/ifindex-N/steer.
func (k *Kernel) steerPinDir(ifi uint32) string {
	return filepath.Join(bpfcls.DevicePinDir(k.bpfPinRoot, k.netnsInode(), ifi), "steer")
}

// forgetSteerer drops the steering of a device whose mq root was added,
// replaced or deleted: it detaches the steering filter (whichever process
// attached it) and removes the pins, so that the next use starts with
// empty maps.
func (k *Kernel) forgetSteerer(ifi uint32) error {
	var errs []error
	if s, ok := k.steerers[ifi]; ok {
		errs = append(errs, s.Close())
		delete(k.steerers, ifi)
	}
	dir := k.steerPinDir(ifi)
	errs = append(errs, steer.Remove(k.link, int(ifi)), steer.RemovePins(dir))
	// The device's and the namespace's pin directories, when that left
	// them empty (a u32 device has no other pins).
	root := filepath.Dir(bpfcls.NetNSPinDir(k.bpfPinRoot, k.netnsInode()))
	for d := filepath.Dir(dir); len(d) > len(root); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break
		}
	}
	return errors.Join(errs...)
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
// entries it wrote (map updates, not tc writes). Dump fills new maps
// (nothing to adopt) with it.
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
