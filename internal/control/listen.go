package control

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// SocketMode is the permission of the control socket: the owner (root) and
// the socket group may connect, nobody else.
const SocketMode fs.FileMode = 0o660

// DefaultSocket is the control socket's default path.
const DefaultSocket = "/run/shaperd/shaperd.sock"

// staleProbeTimeout bounds the connect that tells a live socket from a stale one.
const staleProbeTimeout = time.Second

// Listen creates the control socket at path and listens on it.
//
// The parent directory is created (0755) if missing. The socket gets mode
// 0660 and, when group is not empty, that group (a name or a numeric gid), so
// that root and the group's members may connect (Access.FileGroup is the
// group to give; what each caller may then do is the server's Access). The socket is created in a
// private directory, given its mode and group, then linked into place, so it
// is never reachable with wider permissions.
//
// A socket file nobody answers on (left by a crash) is replaced; a socket a
// process answers on is refused ("another shaperd is running on PATH"), and
// so is a path that exists but is not a socket. Closing the listener removes
// the socket file unless another socket has replaced it since.
func Listen(path, group string) (net.Listener, error) {
	gid := -1
	if group != "" {
		g, err := lookupGroup(group)
		if err != nil {
			return nil, fmt.Errorf("control socket %s: %w", path, err)
		}
		gid = g
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("control socket %s: create directory: %w", path, err)
	}
	if err := checkExisting(path); err != nil {
		return nil, err
	}
	tmpDir, err := os.MkdirTemp(dir, ".shaperd-sock-")
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	defer os.RemoveAll(tmpDir)
	tmpPath := filepath.Join(tmpDir, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmpPath, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	// The file will live at path, not tmpPath: unlinkListener removes it.
	l.SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		l.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(tmpPath, SocketMode); err != nil {
		return fail(err)
	}
	if gid >= 0 {
		if err := os.Chown(tmpPath, -1, gid); err != nil {
			return fail(fmt.Errorf("set group %s: %w", group, err))
		}
	}
	info, err := os.Stat(tmpPath)
	if err != nil {
		return fail(err)
	}
	// link, not rename: it fails rather than replace a socket another
	// daemon created since checkExisting looked.
	if err := os.Link(tmpPath, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fail(fmt.Errorf("another shaperd started on it at the same time: %w", err))
		}
		return fail(err)
	}
	return &unlinkListener{UnixListener: l, path: path, info: info}, nil
}

// checkExisting refuses a live socket or a non-socket at path and removes a
// stale socket.
func checkExisting(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("control socket %s: the path exists and is not a socket (%s); remove it or choose another socket path", path, fi.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, staleProbeTimeout)
	if err == nil {
		c.Close()
		return fmt.Errorf("another shaperd is running on %s (stop it first: systemctl stop shaperd)", path)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		// Stale: nobody listens. Remove it; Listen links the new one in place.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("control socket %s: remove stale socket: %w", path, err)
		}
		return nil
	}
	return fmt.Errorf("control socket %s: cannot tell whether another shaperd uses it: %w", path, err)
}

// lookupGroup resolves a group name or numeric gid.
func lookupGroup(group string) (int, error) {
	if g, err := user.LookupGroup(group); err == nil {
		return strconv.Atoi(g.Gid)
	}
	if n, err := strconv.Atoi(group); err == nil && n >= 0 {
		return n, nil
	}
	return 0, fmt.Errorf("group %q does not exist (create it with groupadd, or change shaperd.toml)", group)
}

// unlinkListener removes its socket file on Close if the file is still the
// one it created.
type unlinkListener struct {
	*net.UnixListener
	path string
	info fs.FileInfo
}

func (l *unlinkListener) Close() error {
	err := l.UnixListener.Close()
	if fi, serr := os.Lstat(l.path); serr == nil && os.SameFile(fi, l.info) {
		os.Remove(l.path)
	}
	return err
}

// Addr returns the socket's final path (the kernel still reports the
// private path it was bound to).
func (l *unlinkListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }
