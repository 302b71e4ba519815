package jsonout

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Checker checks decoded --json output (encoding/json's map[string]any,
// []any and scalars) against the conventions of docs/json.md, and that
// a key has one JSON type across every output it saw. Tests of the
// commands run it on what they print.
type Checker struct {
	// types is each key's JSON types seen, with where.
	types map[string]map[string]string
}

var (
	snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	// rateKey is a key whose value is a rate: a JSON integer in bit/s.
	rateKey = regexp.MustCompile(`(^|_)(rate|ceil|bandwidth|throughput|total)$|bits_per_second`)
	// tcRate is a rate written as tc text ("3mbit", "1.5gbit").
	tcRate = regexp.MustCompile(`^[0-9.]+([kmgt]i?)?(bit|bps)$`)
	b64    = regexp.MustCompile(`^[A-Za-z0-9+/]{16,}={0,2}$`)
)

// Directions allowed for the key "direction" (users' words) and
// "interface_direction".
var (
	UserDirections  = []string{"download", "upload", "both"}
	IfaceDirections = []string{"egress", "ingress"}
)

// Check returns the convention breaches of v, the decoded output of
// command cmd, each naming the path of the key.
func (c *Checker) Check(cmd string, v any) []string {
	if c.types == nil {
		c.types = map[string]map[string]string{}
	}
	var out []string
	c.walk(cmd, "", v, &out)
	return out
}

// Inconsistent lists the keys that had more than one JSON type across
// the outputs checked (null aside), e.g. "cleared" as a list in one
// command and a count in another.
func (c *Checker) Inconsistent() []string {
	var out []string
	for k, ts := range c.types {
		if len(ts) > 1 {
			var seen []string
			for t, where := range ts {
				seen = append(seen, t+" in "+where)
			}
			sort.Strings(seen)
			out = append(out, fmt.Sprintf("key %q is %s", k, strings.Join(seen, ", ")))
		}
	}
	sort.Strings(out)
	return out
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	}
	return "number"
}

func (c *Checker) walk(cmd, path string, v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			p := path + "." + k
			c.key(cmd, p, k, val, out)
			c.walk(cmd, p, val, out)
		}
	case []any:
		for i, e := range x {
			c.walk(cmd, fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	case string:
		if len(x) >= 16 && b64.MatchString(x) {
			if _, err := base64.StdEncoding.DecodeString(x); err == nil {
				*out = append(*out, fmt.Sprintf("%s: %s = %q looks like base64", cmd, path, x))
			}
		}
	}
}

func (c *Checker) key(cmd, path, k string, v any, out *[]string) {
	bad := func(format string, args ...any) {
		*out = append(*out, fmt.Sprintf("%s: %s: ", cmd, path)+fmt.Sprintf(format, args...))
	}
	if t := jsonType(v); t != "null" {
		if c.types[k] == nil {
			c.types[k] = map[string]string{}
		}
		if _, ok := c.types[k][t]; !ok {
			c.types[k][t] = cmd + " " + path
		}
	}
	if !snakeKey.MatchString(k) {
		bad("key %q is not snake_case", k)
	}
	if k == "name" {
		bad(`key "name": say what is named (user, tier, node, interface)`)
	}
	s, isString := v.(string)
	switch {
	case k == "direction" && v != nil:
		if !isString || !contains(UserDirections, s) {
			bad("direction %v is not one of %v", v, UserDirections)
		}
	case k == "interface_direction" && v != nil:
		if !isString || !contains(IfaceDirections, s) {
			bad("interface_direction %v is not one of %v", v, IfaceDirections)
		}
	case rateKey.MatchString(k):
		if t := jsonType(v); t != "number" && t != "null" {
			bad("rate %v is a JSON %s, not an integer in bit/s", v, t)
		} else if f, ok := v.(float64); ok && f != float64(int64(f)) {
			bad("rate %v is not a whole number of bit/s", v)
		}
	case isString && !strings.HasSuffix(k, "_text") && k != "text" && tcRate.MatchString(strings.ToLower(s)):
		bad("%q is a rate as text: rates are integers in bit/s (a *_text key may carry the text)", s)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
