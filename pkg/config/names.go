package config

import (
	"fmt"
	"strings"
)

// NameRule describes the names of tiers and users, which also appear in
// kernel object labels, metrics and the control API.
const NameRule = "1 to 64 characters of a-z, 0-9, '_' and '-'"

// ValidName reports whether s follows NameRule: the rule for the names of
// tiers and users, also for tools that write them (shaperctl migrate).
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ifNameMax is the longest Linux interface name (IFNAMSIZ - 1).
const ifNameMax = 15

// checkIfName returns why s cannot be a Linux interface name, or nil.
func checkIfName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("interface name is empty")
	case len(s) > ifNameMax:
		return fmt.Errorf("interface name %q is longer than %d bytes", s, ifNameMax)
	case s == "." || s == "..":
		return fmt.Errorf("%q is not an interface name", s)
	case strings.ContainsAny(s, "/: \t\n\r\x00"):
		return fmt.Errorf("interface name %q contains '/', ':' or white space", s)
	}
	return nil
}

// defaultIFB is the IFB device name for shaping arrivals on iface.
func defaultIFB(iface string) string {
	n := "ifb-" + iface
	if len(n) > ifNameMax {
		n = n[:ifNameMax]
	}
	return n
}
