package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// lab is a throwaway network namespace holding veth pairs; the benchmark
// shapes the first device of each pair. Devices are named per namespace,
// so fixed names are fine.
type lab struct {
	name string
	devs []string
}

// newLab creates namespace name with one veth pair per device in devs
// (peer: dev + "p"), all up. On failure the namespace is removed again.
func newLab(name string, devs ...string) (*lab, error) {
	if _, err := command("ip", "netns", "add", name); err != nil {
		return nil, err
	}
	l := &lab{name: name, devs: devs}
	for _, d := range devs {
		for _, argv := range [][]string{
			{"ip", "link", "add", d, "type", "veth", "peer", "name", d + "p"},
			{"ip", "link", "set", d, "up"},
			{"ip", "link", "set", d + "p", "up"},
		} {
			if _, err := l.run(argv...); err != nil {
				_ = l.close()
				return nil, err
			}
		}
	}
	return l, nil
}

// run runs argv inside the namespace.
func (l *lab) run(argv ...string) (string, error) {
	return command(append([]string{"ip", "netns", "exec", l.name}, argv...)...)
}

// close deletes every device's root qdisc first (synchronously, so the
// kernel's machine-wide list of tc blocks is back to its size before the
// next measurement; namespace teardown is asynchronous), then the
// namespace, and waits until it is gone.
func (l *lab) close() error {
	for _, d := range l.devs {
		_, _ = l.run("tc", "qdisc", "del", "dev", d, "root")
	}
	if _, err := command("ip", "netns", "del", l.name); err != nil {
		return err
	}
	for i := 0; i < 100; i++ {
		if _, err := os.Stat("/run/netns/" + l.name); os.IsNotExist(err) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("netns %s still listed 5 s after deletion", l.name)
}

// command runs a command and returns its standard output; the error carries
// the command line and its standard error.
func command(argv ...string) (string, error) {
	var out, stderr bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}
