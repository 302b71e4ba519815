package control

import (
	"context"
	"net"
	"syscall"
)

// peerKey is the context key of a request's peer credentials.
type peerKey struct{}

// Peer is the process on the other end of a control connection, from the
// kernel (SO_PEERCRED): who asked, for the log.
type Peer struct {
	PID      int32
	UID, GID uint32
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
	return context.WithValue(ctx, peerKey{}, Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid})
}
