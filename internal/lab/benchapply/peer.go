package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/tbf"
	"github.com/shaperd/shaperd/pkg/tbf/psched"
)

// cost is what one build took: wall time and the CPU time of whoever did
// the work (the tc process, or this process for shaperd).
type cost struct {
	wall, user, sys time.Duration
}

// tcBatch runs `tc -netns NS -force -batch file` and returns its cost;
// any output on stderr (a refused line) is an error.
func tcBatch(l *lab, file string) (cost, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("tc", "-netns", l.name, "-force", "-batch", file)
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	c := cost{wall: time.Since(start)}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		c.user = time.Duration(ru.Utime.Nano())
		c.sys = time.Duration(ru.Stime.Nano())
	}
	if err != nil || stderr.Len() > 0 {
		return c, fmt.Errorf("tc -batch %s in %s: %v: %s", file, l.name, err, firstLines(stderr.String(), 3))
	}
	return c, nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], " | ")
}

// checkPeer dumps what tc built with shaperd's own Dump and compares it
// with desired: the same classes (Diff finds nothing to do for them) and,
// for the hashed layout, the same filters (prefix and class; the links
// differ in one match-all key tc needs, so Dump flags them Damaged). For
// the flat layout it counts tc's filters instead (shaperd does not read
// them).
func checkPeer(l *lab, desired model.Tree, hashed bool) error {
	k, err := kernel.Open(kernel.Options{NetNS: l.name})
	if err != nil {
		return err
	}
	defer k.Close()
	actual, err := k.Dump(desired.Device)
	if err != nil {
		return fmt.Errorf("dump %s in %s: %w", desired.Device, l.name, err)
	}
	for _, c := range model.Diff(actual, desired) {
		if c.Op == model.OpChange && c.Class != nil && c.FromClass != nil && sameBuckets(*c.FromClass, *c.Class) {
			continue
		}
		if c.Class != nil || c.Qdisc != nil {
			return fmt.Errorf("tc's tree differs from shaperd's: %s", c)
		}
	}
	if hashed {
		if len(actual.Filters) != len(desired.Filters) {
			return fmt.Errorf("tc's hashed layout has %d filters, want %d", len(actual.Filters), len(desired.Filters))
		}
		for i, f := range actual.Filters {
			if f.Prefix != desired.Filters[i].Prefix || f.ClassID != desired.Filters[i].ClassID {
				return fmt.Errorf("tc's hashed filter %d: %s -> %s, want %s -> %s", i, f.Prefix, f.ClassID, desired.Filters[i].Prefix, desired.Filters[i].ClassID)
			}
		}
		return nil
	}
	out, err := l.run("tc", "filter", "show", "dev", desired.Device)
	if err != nil {
		return err
	}
	if n := strings.Count(out, "flowid "); n != len(desired.Filters) {
		return fmt.Errorf("tc's flat list has %d filters, want %d", n, len(desired.Filters))
	}
	return nil
}

// sameBuckets reports whether class a (tc's) is class b (shaperd's) but
// for bucket lengths that differ by at most one byte's worth of ticks at
// the class's rate and ceil: tc turns a burst in bytes into ticks with its
// own rounding (some rates give a tick or two less than pkg/tbf), the
// same object for the cost of making it.
func sameBuckets(a, b model.Class) bool {
	near := func(x, y uint32, r tbf.Rate) bool {
		bps := r.BytesPerSecond()
		if bps == 0 {
			return x == y
		}
		tol := int64(1e9/float64(bps)/float64(psched.TickNS)) + 1
		d := int64(x) - int64(y)
		return d >= -tol && d <= tol
	}
	if !near(a.Buffer, b.Buffer, b.Rate) || !near(a.CBuffer, b.CBuffer, b.Ceil) {
		return false
	}
	a.Buffer, a.CBuffer = b.Buffer, b.CBuffer
	return model.ClassParamsEqual(a, b)
}

// writeBatch writes a batch file into dir and returns its path.
func writeBatch(dir, name, body string) (string, error) {
	f := dir + "/" + name
	return f, os.WriteFile(f, []byte(body), 0o600)
}
