package bpfcls

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/shaperd/shaperd/pkg/kernel/internal/progmaps"
)

// objects are the classifier's BPF objects.
type objects struct {
	v4, v6 *ebpf.Map
	prog   *ebpf.Program
	progID ebpf.ProgramID
	pinned bool // in c.dir
}

func (o *objects) close() {
	for _, c := range []interface{ Close() error }{o.v4, o.v6, o.prog} {
		_ = c.Close()
	}
}

// open finds the classifier's maps and program: the pinned ones, or
// (without usable pins) those of the program the attached filter runs.
// With create it mounts bpffs if needed, makes what it cannot find (each
// map and the program load count as a write) and pins what is not pinned;
// without, it neither mounts, pins nor creates anything, and c.objs may
// stay nil. Needs the picture of the filters (c.st).
func (c *Classifier) open(create bool) (writes int, err error) {
	if c.objs == nil {
		c.objs = c.find(create)
	}
	if c.objs == nil && create {
		o, w, err := c.create()
		writes += w
		if err != nil {
			return writes, err
		}
		c.objs = o
	}
	if c.objs != nil && create && !c.objs.pinned {
		if err := EnsureBPFFS(c.opts.PinRoot); err != nil {
			return writes, c.errorf(err, "pin directory")
		}
		if err := c.pin(c.objs); err != nil {
			return writes, err
		}
		c.objs.pinned = true
	}
	return writes, nil
}

// find returns the pinned objects (when the pin root's parent is a bpffs
// mount, which create mounts) or those of the attached program; nil when
// there are none.
func (c *Classifier) find(create bool) *objects {
	var fsErr error
	if create {
		fsErr = EnsureBPFFS(c.opts.PinRoot)
	} else {
		fsErr = isBPFFS(filepath.Dir(c.opts.PinRoot))
	}
	if fsErr == nil {
		if o := c.loadPinned(); o != nil {
			o.pinned = true
			return o
		}
	}
	return c.adoptAttached()
}

// create makes the maps and loads the program.
func (c *Classifier) create() (o *objects, writes int, err error) {
	o = &objects{}
	if o.v4, err = ebpf.NewMap(mapSpec(v4MapName, v4KeySize, c.opts.MaxEntries)); err != nil {
		return nil, writes, c.errorf(err, "create map %s", v4MapName)
	}
	writes++
	if o.v6, err = ebpf.NewMap(mapSpec(v6MapName, v6KeySize, c.opts.MaxEntries)); err != nil {
		_ = o.v4.Close()
		return nil, writes, c.errorf(err, "create map %s", v6MapName)
	}
	writes++
	if o.prog, err = ebpf.NewProgram(programSpec(o.v4, o.v6)); err != nil {
		_ = o.v4.Close()
		_ = o.v6.Close()
		return nil, writes, c.errorf(err, "load program %s", ProgName)
	}
	writes++
	if o.progID, err = progID(o.prog); err != nil {
		o.close()
		return nil, writes, c.errorf(err, "program %s", ProgName)
	}
	return o, writes, nil
}

// pin pins o's maps and program in c.dir, replacing whatever is there.
func (c *Classifier) pin(o *objects) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return c.errorf(err, "create pin directory")
	}
	for _, p := range []struct {
		name string
		obj  interface{ Pin(string) error }
	}{{pinV4, o.v4}, {pinV6, o.v6}, {pinProg, o.prog}} {
		path := filepath.Join(c.dir, p.name)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return c.errorf(err, "replace pin %s", path)
		}
		if err := p.obj.Pin(path); err != nil {
			return c.errorf(err, "pin %s", path)
		}
	}
	return nil
}

// loadPinned opens the pinned maps and program when all three are there
// and are shaperd's current ones (map types and sizes, program name, and
// the program using exactly these maps); nil otherwise.
func (c *Classifier) loadPinned() *objects {
	o := &objects{}
	var err error
	if o.v4, err = ebpf.LoadPinnedMap(filepath.Join(c.dir, pinV4), nil); err != nil {
		return nil
	}
	if o.v6, err = ebpf.LoadPinnedMap(filepath.Join(c.dir, pinV6), nil); err != nil {
		_ = o.v4.Close()
		return nil
	}
	if o.prog, err = ebpf.LoadPinnedProgram(filepath.Join(c.dir, pinProg), nil); err != nil {
		_ = o.v4.Close()
		_ = o.v6.Close()
		return nil
	}
	if !c.matches(o) {
		o.close()
		return nil
	}
	return o
}

// adoptAttached opens the program that shaperd's attached filter runs
// (by id, from the dump) and its two maps, when they are shaperd's
// current ones; nil otherwise. Opening objects by id needs CAP_SYS_ADMIN.
func (c *Classifier) adoptAttached() *objects {
	if c.st == nil || c.st.attached == 0 {
		return nil
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(c.st.attached))
	if err != nil {
		return nil
	}
	o := &objects{prog: prog}
	ms, err := progmaps.Find(prog, v4MapName, v6MapName)
	if err != nil {
		_ = prog.Close()
		return nil
	}
	o.v4, o.v6 = ms[v4MapName], ms[v6MapName]
	if o.v4 == nil || o.v6 == nil || !c.matches(o) {
		_ = prog.Close()
		for _, m := range []*ebpf.Map{o.v4, o.v6} {
			if m != nil {
				_ = m.Close()
			}
		}
		return nil
	}
	return o
}

// matches checks o's maps and program and sets o.progID.
func (c *Classifier) matches(o *objects) bool {
	for _, m := range []struct {
		m    *ebpf.Map
		size uint32
	}{{o.v4, v4KeySize}, {o.v6, v6KeySize}} {
		if m.m.Type() != ebpf.LPMTrie || m.m.KeySize() != m.size || m.m.ValueSize() != valueSize {
			return false
		}
	}
	info, err := o.prog.Info()
	if err != nil || info.Name != ProgName || o.prog.Type() != ebpf.SchedCLS {
		return false
	}
	if !progmaps.UsesOnly(info, o.v4, o.v6) {
		return false
	}
	id, ok := info.ID()
	if !ok {
		return false
	}
	o.progID = id
	return true
}

func progID(p *ebpf.Program) (ebpf.ProgramID, error) {
	info, err := p.Info()
	if err != nil {
		return 0, err
	}
	id, ok := info.ID()
	if !ok {
		return 0, errors.New("the kernel does not report program ids")
	}
	return id, nil
}
