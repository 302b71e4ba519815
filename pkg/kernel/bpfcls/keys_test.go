package bpfcls

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
	"github.com/shaperd/shaperd/pkg/model"
)

// TestKeyRoundTrip: every prefix length of both families and both match
// fields encodes to the documented layout and decodes back.
func TestKeyRoundTrip(t *testing.T) {
	for _, base := range []netip.Addr{netip.MustParseAddr("198.18.123.45"), netip.MustParseAddr("2001:db8:1234::9bdf")} {
		for bits := 0; bits <= base.BitLen(); bits++ {
			p, _ := base.Prefix(bits)
			for _, m := range []model.MatchField{model.MatchDst, model.MatchSrc} {
				k, v6, err := key(p, m)
				if err != nil || v6 != base.Is6() {
					t.Fatalf("key(%v, %s): v6 %v, %v", p, m, v6, err)
				}
				want := []byte{byte(32 + bits), 0, 0, 0, matchByte(m), 0, 0, 0} // little-endian prefixlen
				if !bytes.Equal(k[:8], want) && !bytes.Equal(k[:8], []byte{0, 0, 0, byte(32 + bits), matchByte(m), 0, 0, 0}) {
					t.Errorf("key(%v, %s) header %x", p, m, k[:8])
				}
				if !bytes.Equal(k[8:], p.Addr().AsSlice()) {
					t.Errorf("key(%v, %s) address %x", p, m, k[8:])
				}
				gp, gm, ok := parseKey(k)
				if !ok || gp != p || gm != m {
					t.Errorf("parseKey(key(%v, %s)) = %v %s %v", p, m, gp, gm, ok)
				}
			}
		}
	}
}

// TestKeyRejects: what the maps cannot hold, and keys shaperd never
// writes.
func TestKeyRejects(t *testing.T) {
	for _, c := range []struct{ prefix, want string }{
		{"198.18.1.1/24", "host bits set"},
		{"::ffff:198.18.1.0/120", "IPv4-mapped"},
	} {
		if _, _, err := key(netip.MustParsePrefix(c.prefix), model.MatchDst); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("key(%s): %v, want %q", c.prefix, err, c.want)
		}
	}
	if _, _, err := key(netip.Prefix{}, model.MatchDst); err == nil {
		t.Error("key of the zero prefix: no error")
	}
	good, _, _ := key(netip.MustParsePrefix("198.18.0.0/16"), model.MatchDst)
	for name, mutate := range map[string]func(k []byte){
		"match byte 2":   func(k []byte) { k[4] = 2 },
		"padding":        func(k []byte) { k[6] = 1 },
		"prefixlen < 32": func(k []byte) { copy(k, []byte{4, 0, 0, 0}) },
		"prefixlen > 64": func(k []byte) { copy(k, []byte{65, 0, 0, 0}) },
		"host bits":      func(k []byte) { k[11] = 1 },
		"truncated":      nil,
	} {
		k := bytes.Clone(good)
		if mutate != nil {
			mutate(k)
		} else {
			k = k[:10]
		}
		if _, _, ok := parseKey(k); ok {
			t.Errorf("%s: parseKey accepted %x", name, k)
		}
	}
}

// TestLabCleansPins: the namespace lab removes the pins of a namespace it
// deletes from where the classifier puts them by default.
func TestLabCleansPins(t *testing.T) {
	if got, want := netnslab.BPFPinDir(4026531840), NetNSPinDir("", 4026531840); got != want {
		t.Errorf("netnslab.BPFPinDir = %s, NetNSPinDir = %s", got, want)
	}
}
