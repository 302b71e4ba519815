package bpfcls

import (
	"errors"
	"syscall"

	"github.com/cilium/ebpf"
)

// Ensure makes the maps, the program and the tc filter exist and be
// right: it adopts the pinned ones (or, without pins, the program the
// attached filter runs and its maps, pinning them again), creates what is
// missing (maps and program each count as a write), attaches the program
// (one write; a priority holding anything else is deleted first, one more)
// and deletes the Replaces priorities (one write each). It writes nothing
// when everything is in place.
func (c *Classifier) Ensure() (writes int, err error) {
	if c.connErr != nil {
		return 0, c.errorf(c.connErr, "no netlink connection")
	}
	if err := c.dumpTC(); err != nil {
		return 0, c.errorf(err, "dump filters")
	}
	if writes, err = c.open(true); err != nil {
		return writes, err
	}
	for _, pp := range c.st.replaced {
		if err := c.execute(deleteRequest(c.ifindex, uint32(c.parent), pp[0], pp[1])); err != nil && !errors.Is(err, syscall.ENOENT) {
			c.st = nil
			return writes, c.errorf(err, "delete filter priority %d (u32)", pp[0])
		}
		writes++
	}
	c.st.replaced = nil
	for _, j := range c.junk {
		switch err := c.mapFor(j.v6).Delete(j.key); {
		case errors.Is(err, ebpf.ErrKeyNotExist):
		case err != nil:
			return writes, c.errorf(err, "delete a map entry shaperd did not write (key %x)", j.key)
		default:
			writes++
		}
	}
	c.junk = nil
	if c.st.attached != 0 && c.st.attached == uint32(c.objs.progID) {
		return writes, nil
	}
	if c.st.inPrio > 0 && c.st.attached == 0 {
		// Something else in shaperd's priority (another kind, handle or
		// protocol) that a replace cannot turn into our filter.
		if err := c.execute(deleteRequest(c.ifindex, uint32(c.parent), Prio, 0)); err != nil && !errors.Is(err, syscall.ENOENT) {
			c.st = nil
			return writes, c.errorf(err, "delete filter priority %d", Prio)
		}
		writes++
	}
	if err := c.execute(attachRequest(c.ifindex, uint32(c.parent), c.objs.prog.FD())); err != nil {
		c.st = nil
		return writes, c.errorf(err, "attach program %s (cls_bpf pref %d)", ProgName, Prio)
	}
	writes++
	c.st.attached, c.st.inPrio = uint32(c.objs.progID), 1
	return writes, nil
}
