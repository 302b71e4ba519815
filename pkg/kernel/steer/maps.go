package steer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
)

// bpfFNoPrealloc is BPF_F_NO_PREALLOC, which LPM tries require.
const bpfFNoPrealloc = 1

// newTrie creates an LPM trie from prefixes of addrLen bytes to a queue
// index (uint32).
func newTrie(name string, addrLen int, max uint32) (*ebpf.Map, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       name,
		Type:       ebpf.LPMTrie,
		KeySize:    uint32(4 + addrLen),
		ValueSize:  4,
		MaxEntries: max,
		Flags:      bpfFNoPrealloc,
	})
	if err != nil {
		return nil, fmt.Errorf("create bpf map %s: %w", name, err)
	}
	return m, nil
}

// key encodes an LPM-trie key: prefix length (host order) then the
// address bytes (network order).
func key(p netip.Prefix) []byte {
	a := p.Addr().AsSlice()
	k := make([]byte, 4+len(a))
	binary.NativeEndian.PutUint32(k, uint32(p.Bits()))
	copy(k[4:], a)
	return k
}

// prefixOf decodes a key.
func prefixOf(k []byte) (netip.Prefix, error) {
	if len(k) < 4 {
		return netip.Prefix{}, fmt.Errorf("short key of %d bytes", len(k))
	}
	a, ok := netip.AddrFromSlice(k[4:])
	if !ok {
		return netip.Prefix{}, fmt.Errorf("key of %d bytes", len(k))
	}
	return a.Prefix(int(binary.NativeEndian.Uint32(k)))
}

// mapFor returns the map of p's address family.
func (s *Steerer) mapFor(p netip.Prefix) *ebpf.Map {
	if p.Addr().Is4() {
		return s.v4
	}
	return s.v6
}

// Set steers addresses in p to queue (0-based).
func (s *Steerer) Set(p netip.Prefix, queue uint32) error {
	p = p.Masked()
	if err := s.mapFor(p).Put(key(p), queue); err != nil {
		return fmt.Errorf("steer %v to queue %d on ifindex %d: %w", p, queue, s.ifindex, err)
	}
	return nil
}

// Delete stops steering p; a prefix that is not there is not an error.
func (s *Steerer) Delete(p netip.Prefix) error {
	p = p.Masked()
	if err := s.mapFor(p).Delete(key(p)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("stop steering %v on ifindex %d: %w", p, s.ifindex, err)
	}
	return nil
}

// List reads both maps back: every steered prefix and its queue.
func (s *Steerer) List() (map[netip.Prefix]uint32, error) {
	out := map[netip.Prefix]uint32{}
	for _, m := range []*ebpf.Map{s.v4, s.v6} {
		var k []byte
		var v uint32
		it := m.Iterate()
		for it.Next(&k, &v) {
			p, err := prefixOf(k)
			if err != nil {
				return nil, fmt.Errorf("steering map of ifindex %d: %w", s.ifindex, err)
			}
			out[p] = v
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("read steering map of ifindex %d: %w", s.ifindex, err)
		}
	}
	return out, nil
}
