package control

import (
	"context"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peerKey is the context key of a request's peer credentials.
type peerKey struct{}

// Peer is the process on the other end of a control connection, from the
// kernel (SO_PEERCRED): who asked, for the log and the role.
type Peer struct {
	PID      int32
	UID, GID uint32
	// Groups are the peer's supplementary groups as the kernel held them
	// when it connected (SO_PEERGROUPS, Linux >= 4.13); nil when unknown,
	// and then Access looks them up (see peerGroups).
	Groups []uint32
}

// PeerFrom returns the peer of the request ctx belongs to, if known. A
// Service may use it to log who changed what.
func PeerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// withPeer adds the peer credentials of a unix connection to ctx.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return ctx
	}
	p := Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}
	_ = raw.Control(func(fd uintptr) { p.Groups = peerGroupsOf(int(fd)) })
	return context.WithValue(ctx, peerKey{}, p)
}

// peerGroupsOf reads SO_PEERGROUPS of a connected unix socket: the
// supplementary groups of the peer, race-free and without /proc (which the
// unit's ProtectProc=invisible hides for other users' processes). nil when
// the kernel does not offer it.
func peerGroupsOf(fd int) []uint32 {
	buf := make([]uint32, 64)
	for range 2 {
		n := uint32(len(buf) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch errno {
		case 0:
			return append([]uint32{}, buf[:n/4]...)
		case unix.ERANGE: // n says how much is needed
			buf = make([]uint32, n/4+1)
		default:
			return nil
		}
	}
	return nil
}
