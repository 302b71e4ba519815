package control

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// POSIX ACL xattr layout (linux/posix_acl_xattr.h): a version word, then
// entries of tag, permission and id, sorted by tag and id.
const (
	aclVersion   = 2
	aclUserObj   = 0x01
	aclGroupObj  = 0x04
	aclGroup     = 0x08
	aclMask      = 0x10
	aclOther     = 0x20
	aclUndefined = 0xffffffff
	aclRW        = 4 | 2
)

// AllowGroup lets the members of gid connect to the socket file at path
// besides its owner and its group: it gives the file a POSIX ACL with
// read and write for gid (owner and group keep read and write, others
// nothing: the mode stays 0660). A socket file has one group; this is how
// the admin group reaches a socket that belongs to the socket group. On a
// file system without ACLs the error wraps unix.EOPNOTSUPP; the caller
// should say that admins then need the socket group too.
func AllowGroup(path string, gid int) error {
	entries := [][3]uint32{
		{aclUserObj, aclRW, aclUndefined},
		{aclGroupObj, aclRW, aclUndefined},
		{aclGroup, aclRW, uint32(gid)},
		{aclMask, aclRW, aclUndefined},
		{aclOther, 0, aclUndefined},
	}
	b := binary.LittleEndian.AppendUint32(nil, aclVersion)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	if err := unix.Setxattr(path, "system.posix_acl_access", b, 0); err != nil {
		return fmt.Errorf("control socket %s: let group %d connect (POSIX ACL): %w", path, gid, err)
	}
	return nil
}
