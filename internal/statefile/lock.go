package statefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// ErrLocked is wrapped by LockInterfaces's error when another process
// manages one of the interfaces.
var ErrLocked = errors.New("managed by another shaperd")

// Locks are the flock(2)s that make one process the only manager of an
// interface in a network namespace: one file per device, named by the
// namespace's inode, so that two daemons (or a daemon and `shaperd --once`
// / `--teardown`) never repair each other's changes. The kernel drops the
// locks when the process ends, also on kill -9. A nil *Locks holds none.
type Locks struct {
	files []*os.File
	// dir holds the files; madeDir: LockInterfaces created it.
	dir     string
	madeDir bool
}

// LockInterfaces takes the lock of every device in devices, in the network
// namespace netns names ("" = this process's), with lock files in dir
// (created 0755 when missing). A device locked by another process is an
// error wrapping ErrLocked that names it and that process's pid. Nothing
// stays locked on error.
func LockInterfaces(dir, netns string, devices []string) (*Locks, error) {
	ino, err := netnsInode(netns)
	if err != nil {
		return nil, err
	}
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("interface locks: %w", err)
	}
	devices = append([]string(nil), devices...)
	sort.Strings(devices) // one order for every process: no lock-order races
	l := &Locks{dir: dir, madeDir: errors.Is(statErr, fs.ErrNotExist)}
	for i, dev := range devices {
		if i > 0 && dev == devices[i-1] {
			continue
		}
		path := filepath.Join(dir, fmt.Sprintf("netns-%d-%s.lock", ino, dev))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			l.Release()
			return nil, fmt.Errorf("interface %s: lock %s: %w", dev, path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			l.Release()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("interface %s is %w (pid %s, lock %s): stop it first, or pass --force to take over anyway",
					dev, ErrLocked, lockHolder(path), path)
			}
			return nil, fmt.Errorf("interface %s: lock %s: %w", dev, path, err)
		}
		_ = f.Truncate(0)
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		l.files = append(l.files, f)
	}
	return l, nil
}

// lockHolder reads the pid the holder wrote into the lock file.
func lockHolder(path string) string {
	b, err := os.ReadFile(path)
	if pid := strings.TrimSpace(string(b)); err == nil && pid != "" {
		return pid
	}
	return "unknown"
}

// netnsInode is the inode of the named network namespace (/run/netns/NAME)
// or of this process's ("").
func netnsInode(name string) (uint64, error) {
	path := "/proc/self/ns/net"
	if name != "" {
		path = filepath.Join("/run/netns", name)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("network namespace %s: %w", path, err)
	}
	return st.Ino, nil
}

// Remove deletes the lock files (while still holding them, so that no
// other process can take a lock on a file about to go) and then drops the
// locks, and removes the directory when LockInterfaces created it and it
// is empty: `shaperd --teardown` leaves nothing of shaperd's behind.
func (l *Locks) Remove() error {
	if l == nil {
		return nil
	}
	var errs []error
	for _, f := range l.files {
		if err := os.Remove(f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove lock file: %w", err))
		}
	}
	l.Release()
	if l.madeDir {
		// Not empty (the control socket of a daemon, another lock): it stays.
		_ = os.Remove(l.dir)
	}
	return errors.Join(errs...)
}

// Release drops every lock (the files stay, empty of meaning).
func (l *Locks) Release() {
	if l == nil {
		return
	}
	for _, f := range l.files {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
	l.files = nil
}
