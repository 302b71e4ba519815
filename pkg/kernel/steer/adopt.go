package steer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/shaperd/shaperd/pkg/kernel/internal/progmaps"
	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Pin file names in a steerer's pin directory (bpffs refuses dots).
const (
	pinV4   = "v4"
	pinV6   = "v6"
	pinProg = "prog"
)

// Map names, and the program's name per match field: the name tells an
// adopted program's direction (a program name has at most 15 bytes).
const (
	v4MapName   = "shaperd_steer4"
	v6MapName   = "shaperd_steer6"
	progNameDst = "shaperd_steer_d"
	progNameSrc = "shaperd_steer_s"
)

func progName(matchSrc bool) string {
	if matchSrc {
		return progNameSrc
	}
	return progNameDst
}

// Adopt returns the steering program and maps of device ifindex that a
// Steerer (this process's or an earlier one's) left: those pinned in dir
// ("" looks at no pins), else those of the program the steering filter at
// the device's clsact egress runs (opening objects by id needs
// CAP_SYS_ADMIN). They must be the current program for matchSrc and its
// two LPM tries; nil (and no error) when there are none such. Adopt
// neither creates, pins nor attaches anything.
func Adopt(link *vnl.Handle, ifindex int, matchSrc bool, dir string) *Steerer {
	s := &Steerer{link: link, ifindex: ifindex, matchSrc: matchSrc}
	if dir != "" && s.loadPinned(dir) {
		s.pinned = dir
		return s
	}
	id, err := s.attachedID()
	if err != nil || id == 0 {
		return nil
	}
	if !s.loadByID(ebpf.ProgramID(id)) {
		return nil
	}
	return s
}

// loadPinned opens the objects pinned in dir when they are right.
func (s *Steerer) loadPinned(dir string) bool {
	var err error
	if s.v4, err = ebpf.LoadPinnedMap(filepath.Join(dir, pinV4), nil); err == nil {
		if s.v6, err = ebpf.LoadPinnedMap(filepath.Join(dir, pinV6), nil); err == nil {
			s.prog, err = ebpf.LoadPinnedProgram(filepath.Join(dir, pinProg), nil)
		}
	}
	if err != nil || !s.matches() {
		s.closeObjects()
		return false
	}
	return true
}

// loadByID opens program id and its two maps when they are right.
func (s *Steerer) loadByID(id ebpf.ProgramID) bool {
	prog, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return false
	}
	s.prog = prog
	ms, err := progmaps.Find(prog, v4MapName, v6MapName)
	if err != nil {
		s.closeObjects()
		return false
	}
	s.v4, s.v6 = ms[v4MapName], ms[v6MapName]
	if s.v4 == nil || s.v6 == nil || !s.matches() {
		s.closeObjects()
		return false
	}
	return true
}

// matches checks the open objects: two LPM tries of the right sizes, and
// the program of s's direction using exactly those two maps.
func (s *Steerer) matches() bool {
	for _, m := range []struct {
		m       *ebpf.Map
		keySize uint32
	}{{s.v4, 4 + 4}, {s.v6, 4 + 16}} {
		if m.m == nil || m.m.Type() != ebpf.LPMTrie || m.m.KeySize() != m.keySize || m.m.ValueSize() != 4 {
			return false
		}
	}
	if s.prog == nil || s.prog.Type() != ebpf.SchedCLS {
		return false
	}
	info, err := s.prog.Info()
	if err != nil || info.Name != progName(s.matchSrc) {
		return false
	}
	if !progmaps.UsesOnly(info, s.v4, s.v6) {
		return false
	}
	return true
}

// closeObjects closes and forgets the open maps and program.
func (s *Steerer) closeObjects() {
	_ = s.Close()
	s.v4, s.v6, s.prog = nil, nil, nil
}

// attachedID is the program id of the steering filter at the device's
// clsact egress (FilterPriority, handle 1), 0 when there is none.
func (s *Steerer) attachedID() (int, error) {
	link, err := s.link.LinkByIndex(s.ifindex)
	if err != nil {
		return 0, fmt.Errorf("ifindex %d: %w", s.ifindex, err)
	}
	fs, err := s.link.FilterList(link, vnl.HANDLE_MIN_EGRESS)
	if err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) { // no clsact
			return 0, nil
		}
		return 0, fmt.Errorf("list egress filters of ifindex %d: %w", s.ifindex, err)
	}
	for _, f := range fs {
		if b, ok := f.(*vnl.BpfFilter); ok && b.Priority == FilterPriority && b.Handle == filterHandle {
			return b.Id, nil
		}
	}
	return 0, nil
}

// Attached reports whether the steering filter at the device's clsact
// egress runs s's program.
func (s *Steerer) Attached() (bool, error) {
	id, err := s.attachedID()
	if err != nil || id == 0 {
		return false, err
	}
	info, err := s.prog.Info()
	if err != nil {
		return false, fmt.Errorf("steering program of ifindex %d: %w", s.ifindex, err)
	}
	own, ok := info.ID()
	return ok && int(own) == id, nil
}

// Pin pins s's maps and program in dir (created, mode 0700, on a bpffs
// mount), replacing what is pinned there; a Steerer already pinned there
// does nothing. Pinning is what lets a new process adopt the steering
// without CAP_SYS_ADMIN (Adopt).
func (s *Steerer) Pin(dir string) error {
	if s.pinned == dir {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("steering pins of ifindex %d: %w", s.ifindex, err)
	}
	for _, p := range []struct {
		name string
		obj  interface{ Pin(string) error }
	}{{pinV4, s.v4}, {pinV6, s.v6}, {pinProg, s.prog}} {
		path := filepath.Join(dir, p.name)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("steering pins of ifindex %d: replace %s: %w", s.ifindex, path, err)
		}
		if err := p.obj.Pin(path); err != nil {
			return fmt.Errorf("steering pins of ifindex %d: pin %s: %w", s.ifindex, path, err)
		}
	}
	s.pinned = dir
	return nil
}

// Pinned reports whether s's objects are pinned (by Pin, or found pinned
// by Adopt).
func (s *Steerer) Pinned() bool { return s.pinned != "" }

// RemovePins deletes the steering pins in dir and dir itself when it is
// left empty; missing ones are not errors. With the pins and the filter
// gone the kernel frees the maps and program.
func RemovePins(dir string) error {
	var errs []error
	for _, f := range []string{pinProg, pinV4, pinV6} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpin %s: %w", filepath.Join(dir, f), err))
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTEMPTY) {
		errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
	}
	return errors.Join(errs...)
}
