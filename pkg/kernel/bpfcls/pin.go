package bpfcls

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/shaperd/shaperd/pkg/model"
)

// DefaultPinRoot is where classifiers pin their maps and program when
// Options.PinRoot is empty. Its parent must be a bpffs mount; Ensure
// mounts one there when it is not (see EnsureBPFFS).
const DefaultPinRoot = "/sys/fs/bpf/shaperd"

// Pin file names in a classifier's directory. bpffs refuses names with
// dots.
const (
	pinV4   = "v4"
	pinV6   = "v6"
	pinProg = "prog"
)

// PinDir is the directory of the classifier of qdisc parent on device
// ifindex in the network namespace whose nsfs inode is netns:
//
//	ROOT/netns-INODE/ifindex-N/qdisc-MAJOR
//
// bpffs is shared by every network namespace of a mount namespace, so the
// namespace is part of the path; the device is named by its index, which
// does not change with a rename.
func PinDir(root string, netns uint64, ifindex uint32, parent model.Handle) string {
	return filepath.Join(DevicePinDir(root, netns, ifindex), fmt.Sprintf("qdisc-%x", parent.Major()))
}

// DevicePinDir is the directory of every pin of device ifindex (its
// classifiers' PinDirs, and the queue steering's) in the network namespace
// whose nsfs inode is netns: ROOT/netns-INODE/ifindex-N.
func DevicePinDir(root string, netns uint64, ifindex uint32) string {
	return filepath.Join(NetNSPinDir(root, netns), fmt.Sprintf("ifindex-%d", ifindex))
}

// NetNSPinDir is the directory of every classifier's pins in the network
// namespace whose nsfs inode is netns (ROOT/netns-INODE).
func NetNSPinDir(root string, netns uint64) string {
	if root == "" {
		root = DefaultPinRoot
	}
	return filepath.Join(root, fmt.Sprintf("netns-%d", netns))
}

// EnsureBPFFS makes sure that the parent directory of root (the pin root,
// e.g. /sys/fs/bpf for /sys/fs/bpf/shaperd) is a bpffs mount, mounting
// one (mode 0700) when it is not, and creates root. A bpffs mount lives
// in the caller's mount namespace: `ip netns exec` gives its command a
// new one with a fresh /sys, where a mount made here is gone when the
// command exits (the classifier then adopts its program and maps through
// the attached filter; see the package documentation).
func EnsureBPFFS(root string) error {
	if root == "" {
		root = DefaultPinRoot
	}
	mnt := filepath.Dir(root)
	var st unix.Statfs_t
	err := unix.Statfs(mnt, &st)
	if errors.Is(err, unix.ENOENT) {
		if err := os.MkdirAll(mnt, 0o700); err != nil {
			return fmt.Errorf("bpffs: create %s: %w", mnt, err)
		}
		err = unix.Statfs(mnt, &st)
	}
	if err != nil {
		return fmt.Errorf("bpffs: statfs %s: %w", mnt, err)
	}
	if st.Type != unix.BPF_FS_MAGIC {
		if err := unix.Mount("bpf", mnt, "bpf", 0, "mode=0700"); err != nil {
			return fmt.Errorf("bpffs: %s is not a bpf filesystem and mounting one there failed: %w", mnt, err)
		}
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("bpffs: create %s: %w", root, err)
	}
	return nil
}

// BPFFSMounted reports whether the parent directory of root (the pin root;
// "" for DefaultPinRoot) is a bpffs mount already: nil, or why not. Without
// one only a process with CAP_SYS_ADMIN can pin (EnsureBPFFS mounts it).
func BPFFSMounted(root string) error {
	if root == "" {
		root = DefaultPinRoot
	}
	return isBPFFS(filepath.Dir(root))
}

// CheckBPFFS reports whether pins can be made under root without trying:
// nil when root's parent is a bpffs mount, or when this process has
// CAP_SYS_ADMIN (EnsureBPFFS may then mount one); else an error saying
// why not.
func CheckBPFFS(root string) error {
	if root == "" {
		root = DefaultPinRoot
	}
	mnt := filepath.Dir(root)
	if isBPFFS(mnt) == nil {
		return nil
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err == nil && data[0].Effective&(1<<unix.CAP_SYS_ADMIN) != 0 {
		return nil
	}
	return fmt.Errorf("%s is not a bpf filesystem, and mounting one needs CAP_SYS_ADMIN", mnt)
}

// isBPFFS returns nil when dir is a bpffs mount.
func isBPFFS(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return err
	}
	if st.Type != unix.BPF_FS_MAGIC {
		return fmt.Errorf("%s is not a bpf filesystem", dir)
	}
	return nil
}

// removePins deletes the pin files of dir and then dir and its parents up
// to (not including) root, as far as they are empty. Missing files are
// not errors.
func removePins(root, dir string) error {
	if root == "" {
		root = DefaultPinRoot
	}
	var errs []error
	for _, f := range []string{pinProg, pinV4, pinV6} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpin %s: %w", filepath.Join(dir, f), err))
		}
	}
	for d := dir; d != root && len(d) > len(root); d = filepath.Dir(d) {
		if err := os.Remove(d); err != nil {
			if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
				errs = append(errs, fmt.Errorf("remove pin directory %s: %w", d, err))
			}
			break
		}
	}
	return errors.Join(errs...)
}

// NetNSInode is the nsfs inode of the network namespace open as fd, or
// of the calling thread's namespace when fd < 0 (it names the pin
// directory: PinDir).
func NetNSInode(fd int) (uint64, error) {
	var st unix.Stat_t
	var err error
	if fd >= 0 {
		err = unix.Fstat(fd, &st)
	} else {
		err = unix.Stat("/proc/thread-self/ns/net", &st)
	}
	if err != nil {
		return 0, fmt.Errorf("network namespace inode: %w", err)
	}
	return st.Ino, nil
}
