package fusefs

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// blockSize is the st_blksize the mount reports: large, so that tools that
// size their buffers by it (cp, tar) issue large reads and writes.
const blockSize = 128 << 10

// unixMode turns a Go file mode into st_mode bits.
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	switch {
	case m&fs.ModeDir != 0:
		u |= syscall.S_IFDIR
	case m&fs.ModeSymlink != 0:
		u |= syscall.S_IFLNK
	case m&fs.ModeNamedPipe != 0:
		u |= syscall.S_IFIFO
	case m&fs.ModeSocket != 0:
		u |= syscall.S_IFSOCK
	case m&fs.ModeCharDevice != 0:
		u |= syscall.S_IFCHR
	case m&fs.ModeDevice != 0:
		u |= syscall.S_IFBLK
	default:
		u |= syscall.S_IFREG
	}
	if m&fs.ModeSetuid != 0 {
		u |= syscall.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		u |= syscall.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		u |= syscall.S_ISVTX
	}
	return u
}

// goPerm turns the low 12 bits of a st_mode into Go permission bits.
func goPerm(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	if u&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if u&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if u&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// fillAttr writes fi into a FUSE attribute block.
func fillAttr(fi *chunkfs.FileInfo, a *fuse.Attr) {
	a.Ino = fi.Inode
	a.Mode = unixMode(fi.FileMode)
	a.Size = uint64(fi.Length)
	if fi.FileMode.IsDir() {
		a.Size = 4096
	}
	if fi.FileMode&fs.ModeSymlink != 0 {
		a.Size = uint64(len(fi.Target))
	}
	a.Blocks = (uint64(fi.Length) + 511) / 512
	a.Blksize = blockSize
	a.Nlink = fi.Nlink
	if a.Nlink == 0 { // a backend that does not count links
		a.Nlink = 1
		if fi.FileMode.IsDir() {
			a.Nlink = 2
		}
	}
	a.Rdev = fi.Rdev
	a.Owner = fuse.Owner{Uid: fi.UID, Gid: fi.GID}
	setTime(&a.Mtime, &a.Mtimensec, fi.MTime)
	setTime(&a.Atime, &a.Atimensec, fi.ATime)
	setTime(&a.Ctime, &a.Ctimensec, fi.CTime)
}

func setTime(sec *uint64, nsec *uint32, t time.Time) {
	if t.IsZero() {
		*sec, *nsec = 0, 0
		return
	}
	*sec, *nsec = uint64(t.Unix()), uint32(t.Nanosecond())
}

// callerOf returns the identity of the process behind a FUSE request: its
// uid, its gid and, for anyone but root, its supplementary groups as
// /proc lists them (FUSE passes only uid and gid).
func callerOf(ctx context.Context) chunkfs.Caller {
	fc, ok := fuse.FromContext(ctx)
	if !ok {
		return chunkfs.Root
	}
	c := chunkfs.Caller{UID: fc.Uid, GIDs: []uint32{fc.Gid}}
	if fc.Uid != 0 && fc.Pid != 0 {
		for _, g := range procGroups(fc.Pid) {
			if g != fc.Gid {
				c.GIDs = append(c.GIDs, g)
			}
		}
	}
	return c
}

// procGroups reads the supplementary groups of process pid; nil when the
// process is gone.
func procGroups(pid uint32) []uint32 {
	f, err := os.Open("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return nil
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), "Groups:")
		if !ok {
			continue
		}
		var gs []uint32
		for _, f := range strings.Fields(rest) {
			if g, err := strconv.ParseUint(f, 10, 32); err == nil {
				gs = append(gs, uint32(g))
			}
		}
		return gs
	}
	return nil
}
