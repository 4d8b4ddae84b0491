package namespace

import (
	"io/fs"
	"slices"

	"github.com/chunkfs/chunkfs"
)

// Access bits, as in access(2).
const (
	accessRead  = 4
	accessWrite = 2
	accessExec  = 1
)

// permExtra are the mode bits besides the nine permission bits that a
// caller may set.
const permExtra = fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// permBits keeps the settable bits of a requested mode.
func permBits(m uint32) fs.FileMode { return fs.FileMode(m) & (fs.ModePerm | permExtra) }

// isRoot reports whether c is the superuser: UID 0, or a member of the
// superuser group as the master marked it (Caller.Super).
func isRoot(c *chunkfs.Caller) bool { return c.Superuser() }

// inGroup reports whether c belongs to gid.
func inGroup(c *chunkfs.Caller, gid uint32) bool { return slices.Contains(c.GIDs, gid) }

// primaryGID is the caller's first group, or 0 when it names none.
func primaryGID(c *chunkfs.Caller) uint32 {
	if len(c.GIDs) == 0 {
		return 0
	}
	return c.GIDs[0]
}

// may reports whether c has every access bit in want on n (Caller.Allows).
func may(c *chunkfs.Caller, n *inode, want uint32) bool {
	return c.Allows(n.mode, n.uid, n.gid, chunkfs.Access(want))
}

// mayRemove reports whether c may remove or replace entry n of directory
// dir: write and search permission on dir, and, when dir is sticky,
// ownership of n or dir.
func mayRemove(c *chunkfs.Caller, dir, n *inode) bool {
	if !may(c, dir, accessWrite|accessExec) {
		return false
	}
	if dir.mode&fs.ModeSticky == 0 || isRoot(c) {
		return true
	}
	return c.UID == n.uid || c.UID == dir.uid
}

// owns reports whether c owns n or is the superuser.
func owns(c *chunkfs.Caller, n *inode) bool { return isRoot(c) || c.UID == n.uid }

// permission is a refusal: "op path: permission denied[: why]", one line.
func permission(op, p, why string) error {
	if why == "" {
		return chunkfs.E(op, p, chunkfs.KindPermission, "")
	}
	return chunkfs.E(op, p, chunkfs.KindPermission, chunkfs.KindPermission.String()+": "+why)
}
