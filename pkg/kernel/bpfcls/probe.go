package bpfcls

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/kernel/internal/tcwire"
	"github.com/shaperd/shaperd/pkg/model"
)

// Probe reports whether the running kernel, for this process, can run the
// classifier: it creates the two maps (one entry each), loads the
// program, and, when conn is not nil, attaches it under qdisc parent of
// device ifindex (which must have a classful qdisc, e.g. an HTB root on
// the loopback of a throwaway namespace) and deletes it again. The error
// carries the kernel's reason (EPERM without CAP_BPF, the verifier's log,
// an unknown filter kind "bpf", ...). Nothing is pinned.
func Probe(conn *netlink.Conn, ifindex uint32, parent model.Handle) error {
	v4, err := ebpf.NewMap(mapSpec(v4MapName, v4KeySize, 1))
	if err != nil {
		return fmt.Errorf("create an LPM-trie map: %w", permErr(err))
	}
	defer v4.Close()
	v6, err := ebpf.NewMap(mapSpec(v6MapName, v6KeySize, 1))
	if err != nil {
		return fmt.Errorf("create an LPM-trie map: %w", permErr(err))
	}
	defer v6.Close()
	prog, err := ebpf.NewProgram(programSpec(v4, v6))
	if err != nil {
		return fmt.Errorf("load the classifier program: %w", permErr(err))
	}
	defer prog.Close()
	if conn == nil {
		return nil
	}
	if _, err := conn.Execute(attachRequest(ifindex, uint32(parent), prog.FD())); err != nil {
		return fmt.Errorf("attach a cls_bpf filter: %w", err)
	}
	if _, err := conn.Execute(deleteRequest(ifindex, uint32(parent), Prio, 0)); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("delete the probe's cls_bpf filter: %w", err)
	}
	return nil
}

// ProbeRoot is the HTB qdisc request Probe's caller may use to give a
// throwaway device a classful root (handle 1:, default class 0).
func ProbeRoot(ifindex uint32) netlink.Message {
	m := tcwire.Tcmsg{Ifindex: ifindex, Handle: uint32(model.RootQdisc), Parent: uint32(model.HandleRoot)}
	a := tcwire.Attrs{B: m.AppendTo(nil)}
	a.String(tcwire.TCAKind, "htb")
	a.Nest(tcwire.TCAOptions, func() {
		a.Bytes(tcwire.TCAHTBInit, tcwire.HTBGlob{Version: tcwire.HTBVersion, Rate2Quantum: 10}.AppendTo(nil))
	})
	return netlink.Message{
		Header: netlink.Header{Type: tcwire.RTMNewQdisc, Flags: netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Excl},
		Data:   a.B,
	}
}

// permErr replaces a refusal for want of privilege (EPERM) by one that
// says what is missing: cilium/ebpf's own text suggests raising
// RLIMIT_MEMLOCK, which kernels since 5.11 (memory cgroup accounting) do
// not use.
func permErr(err error) error {
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w (needs CAP_BPF with CAP_NET_ADMIN, or CAP_SYS_ADMIN)", unix.EPERM)
	}
	return err
}
