package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Defaults of the [fleet] table.
const (
	DefaultFleetPrefix      = "/shaperd"
	DefaultFleetDialTimeout = 5 * time.Second
)

// Fleet is the [fleet] table: where the shared plan, fleet overrides and
// router registrations are kept (etcd). It stays local to each router; a
// configuration without [fleet] has a nil Plan.Fleet and works alone.
type Fleet struct {
	// Endpoints are etcd client URLs ("http://10.0.0.5:2379",
	// "https://etcd1:2379"); at least one.
	Endpoints []string
	// Prefix is the key prefix everything shaperd keeps lives under.
	// Default "/shaperd"; starts with '/', does not end with one.
	Prefix string
	// Router is this router's name in the fleet (its registration key).
	// Default: the host name.
	Router string
	// DialTimeout bounds connecting to etcd. Default 5s.
	DialTimeout time.Duration
	// CA, Cert and Key are PEM files for TLS (absolute paths); Cert and
	// Key go together. Empty: the system roots, no client certificate.
	CA, Cert, Key string
	// Username and PasswordFile authenticate to etcd; they go together.
	// The file's first line is the password.
	Username, PasswordFile string
}

// validEndpoint reports whether s is an etcd client URL: http or https
// with a host.
func validEndpoint(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// ParseEndpoints reads etcd client URLs separated by commas, as etcdctl's
// --endpoints takes them: "http://10.0.0.5:2379,https://etcd2:2379". A
// bare HOST:PORT means http://HOST:PORT. At least one is needed.
func ParseEndpoints(s string) ([]string, error) {
	var out []string
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if !strings.Contains(e, "://") {
			e = "http://" + e
		}
		if !validEndpoint(e) {
			return nil, fmt.Errorf("%q is not an etcd client URL (http://HOST:PORT, https://HOST:PORT or HOST:PORT)", e)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no etcd endpoint in %q", s)
	}
	return out, nil
}

// CheckFleetPrefix refuses a key prefix that does not start with '/', is
// only "/", or ends with '/'.
func CheckFleetPrefix(s string) error {
	if !strings.HasPrefix(s, "/") || len(s) < 2 || strings.HasSuffix(s, "/") {
		return fmt.Errorf("%q must start with '/' and not end with one (default %q)", s, DefaultFleetPrefix)
	}
	return nil
}

// validRouter reports whether s can name a router: 1 to 64 characters of
// A-Z, a-z, 0-9, '.', '_' and '-' (a host name fits).
func validRouter(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// decodeFleet reads [fleet]; nil when the table is absent.
func decodeFleet(rt *table) *Fleet {
	t, ok := rt.sub("fleet")
	if !ok {
		return nil
	}
	f := &Fleet{Prefix: DefaultFleetPrefix, DialTimeout: DefaultFleetDialTimeout}
	if eps, ok := t.strs("endpoints"); ok {
		for _, e := range eps {
			if !validEndpoint(e.s) {
				t.f.errf(index(t.key("endpoints"), e.i), "%q is not an etcd client URL (http://HOST:PORT or https://HOST:PORT)", e.s)
			} else {
				f.Endpoints = append(f.Endpoints, e.s)
			}
		}
		if len(eps) == 0 {
			t.errf("endpoints", "no etcd endpoint is given")
		}
	} else if !t.has("endpoints") {
		t.require("endpoints")
	}
	if s, ok := t.str("prefix"); ok {
		if err := CheckFleetPrefix(s); err != nil {
			t.errf("prefix", "%v", err)
		} else {
			f.Prefix = s
		}
	}
	if s, ok := t.str("router"); ok {
		if !validRouter(s) {
			t.errf("router", "%q is not a router name (1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-')", s)
		} else {
			f.Router = s
		}
	} else if h, err := os.Hostname(); err == nil && validRouter(h) {
		f.Router = h
	} else {
		t.errf("router", "the host name %q cannot name this router; set fleet.router", h)
	}
	if v, ok := t.duration("dial_timeout", 100*time.Millisecond); ok {
		f.DialTimeout = v
	}
	abs := func(k string) string {
		s, ok := t.str(k)
		if !ok {
			return ""
		}
		if !filepath.IsAbs(s) {
			t.errf(k, "%q is not an absolute path", s)
			return ""
		}
		return s
	}
	f.CA, f.Cert, f.Key = abs("ca"), abs("cert"), abs("key")
	f.PasswordFile = abs("password_file")
	if s, ok := t.str("username"); ok {
		if s == "" {
			t.errf("username", "user name is empty (leave the key out for no authentication)")
		}
		f.Username = s
	}
	if t.has("cert") != t.has("key") {
		if t.has("cert") {
			t.errf("cert", "a client certificate needs fleet.key too")
		} else {
			t.errf("key", "a client key needs fleet.cert too")
		}
	}
	if t.has("username") != t.has("password_file") {
		if t.has("username") {
			t.errf("username", "fleet.username needs fleet.password_file too")
		} else {
			t.errf("password_file", "fleet.password_file needs fleet.username too")
		}
	}
	t.finish()
	return f
}

// LoadFleet reads only the [fleet] table of the main file at path (nil
// when it has none): what a router needs to reach the fleet before its
// plan, which may depend on the fleet's tiers, can be loaded.
func LoadFleet(path string) (*Fleet, error) {
	c := &collector{order: map[string]int{path: 0}}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	root, mf, ok := parseFile(path, data, c)
	if !ok {
		return nil, c.result()
	}
	f := decodeFleet(mf.table("", root))
	if errs := c.result(); errs != nil {
		return nil, errs
	}
	return f, nil
}
