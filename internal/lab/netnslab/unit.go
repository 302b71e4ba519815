package netnslab

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"
)

// Unit is what a systemd service unit says about how to run its service:
// the command lines of its [Service] section, read from the unit file, so
// that tests start a daemon exactly as the unit does.
type Unit struct {
	// Path is the unit file.
	Path string
	// Type is Type= ("simple" when absent).
	Type string
	// ExecStartPre, ExecStart and ExecReload are the command lines, each
	// split into words, in the order the file lists them. systemd's
	// prefixes ("-", "@", "+", "!", ":") are removed.
	ExecStartPre, ExecStart, ExecReload [][]string
	// Watchdog and StartTimeout are WatchdogSec= and TimeoutStartSec= (0
	// when absent).
	Watchdog, StartTimeout time.Duration
	// Environment holds the Environment= assignments (KEY=VALUE).
	Environment []string
}

// ReadUnit parses the [Service] section of a systemd unit file. It knows
// the subset shaperd's unit uses: one command per Exec line, words
// separated by blanks, no quoting, durations in seconds ("30s", "2min"
// and plain numbers).
func ReadUnit(path string) (*Unit, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	u := &Unit{Path: path, Type: "simple"}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		if section != "[Service]" {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: not KEY=VALUE: %q", path, n, line)
		}
		switch key {
		case "Type":
			u.Type = value
		case "ExecStartPre", "ExecStart", "ExecReload":
			argv := strings.Fields(strings.TrimLeft(value, "-@+!:"))
			if len(argv) == 0 {
				return nil, fmt.Errorf("%s:%d: %s is empty", path, n, key)
			}
			switch key {
			case "ExecStartPre":
				u.ExecStartPre = append(u.ExecStartPre, argv)
			case "ExecStart":
				u.ExecStart = append(u.ExecStart, argv)
			default:
				u.ExecReload = append(u.ExecReload, argv)
			}
		case "WatchdogSec", "TimeoutStartSec":
			d, err := unitDuration(value)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %s: %w", path, n, key, err)
			}
			if key == "WatchdogSec" {
				u.Watchdog = d
			} else {
				u.StartTimeout = d
			}
		case "Environment":
			u.Environment = append(u.Environment, strings.Fields(value)...)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(u.ExecStart) != 1 {
		return nil, fmt.Errorf("%s: want exactly one ExecStart=, have %d", path, len(u.ExecStart))
	}
	return u, nil
}

// unitDuration parses the systemd time spans the unit uses: a plain number
// of seconds, or a number with s, min, ms or us.
func unitDuration(s string) (time.Duration, error) {
	for _, suf := range []struct {
		s string
		d time.Duration
	}{{"min", time.Minute}, {"ms", time.Millisecond}, {"us", time.Microsecond}, {"s", time.Second}, {"", time.Second}} {
		if num, ok := strings.CutSuffix(s, suf.s); ok {
			var v int64
			if _, err := fmt.Sscanf(num, "%d", &v); err != nil || fmt.Sprint(v) != num {
				continue
			}
			return time.Duration(v) * suf.d, nil
		}
	}
	return 0, fmt.Errorf("time span %q: want a number with s, min, ms or us", s)
}

// Rewrite returns argv with every occurrence of each key of paths replaced
// by its value (installed paths by the test's binaries and files).
func Rewrite(argv []string, paths map[string]string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		for from, to := range paths {
			a = strings.ReplaceAll(a, from, to)
		}
		out[i] = a
	}
	return out
}
