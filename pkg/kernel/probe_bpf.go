package kernel

import (
	"fmt"
	"sync"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/kernel/bpfcls"
	"github.com/shaperd/shaperd/pkg/model"
)

// bpfProbed caches ProbeBPF for the process: what the kernel allows does
// not change while shaperd runs.
var bpfProbed struct {
	once sync.Once
	err  error
}

// BPFClassifierAvailable reports whether the bpf classifier works for
// this process: nil, or an error with the kernel's reason. It is probed
// once per process and cached (ProbeBPF).
func BPFClassifierAvailable() error {
	bpfProbed.once.Do(func() { bpfProbed.err = ProbeBPF() })
	return bpfProbed.err
}

// ProbeBPF tries what the bpf classifier needs: creating its LPM-trie
// maps and loading its program (the bpf() syscall, CAP_BPF or
// CAP_SYS_ADMIN, the verifier) and, where a throwaway network namespace
// can be made (CAP_SYS_ADMIN), attaching it as a cls_bpf filter under an
// HTB root on that namespace's loopback. No real device is touched and
// nothing is pinned. It also checks that pins can be made under
// bpfcls.DefaultPinRoot (bpffs mounted at /sys/fs/bpf, or CAP_SYS_ADMIN to
// mount it). The error names what failed with the kernel's reason.
func ProbeBPF() error {
	if err := probeBPF(); err != nil {
		return err
	}
	if err := bpfcls.CheckBPFFS(bpfcls.DefaultPinRoot); err != nil {
		return fmt.Errorf("bpf classifier: pins: %w", err)
	}
	return nil
}

func probeBPF() error {
	ns, err := throwawayNetns()
	if err != nil {
		// Without a namespace (the unit's RestrictNamespaces=yes): maps
		// and program only; cls_bpf is in every kernel that has bpf().
		if perr := bpfcls.Probe(nil, 0, 0); perr != nil {
			return fmt.Errorf("bpf classifier: %w", perr)
		}
		return nil
	}
	defer ns.Close()
	conn, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: int(ns)})
	if err != nil {
		return fmt.Errorf("bpf classifier probe: rtnetlink socket in a throwaway namespace: %w", err)
	}
	defer conn.Close()
	_ = conn.SetOption(netlink.ExtendedAcknowledge, true)
	const loIndex = 1
	if _, err := conn.Execute(bpfcls.ProbeRoot(loIndex)); err != nil {
		return fmt.Errorf("bpf classifier probe: HTB root on a throwaway loopback: %w", err)
	}
	if err := bpfcls.Probe(conn, loIndex, model.RootQdisc); err != nil {
		return fmt.Errorf("bpf classifier: %w", err)
	}
	return nil
}
