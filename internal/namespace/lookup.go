package namespace

import (
	"strings"
	"time"

	"github.com/chunkfs/chunkfs"
)

// walk resolves the directory components of p (a valid path, not "/") for
// c and returns the parent directory and the final name. Each directory on
// the way must exist and be searchable by c.
func (ns *Namespace) walk(op string, c *chunkfs.Caller, p string) (*inode, string, error) {
	dir, rest := ns.root, p[1:]
	for {
		if !may(c, dir, accessExec) {
			return nil, "", chunkfs.E(op, p, chunkfs.KindPermission, "")
		}
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return dir, rest, nil
		}
		next := dir.ext().kids.get(rest[:i])
		switch {
		case next == nil:
			return nil, "", chunkfs.E(op, p, chunkfs.KindNotExist, "")
		case next.isSymlink():
			return nil, "", chunkfs.E(op, p, chunkfs.KindNotDir, "symbolic link in the path; the master does not follow links")
		case !next.isDir():
			return nil, "", chunkfs.E(op, p, chunkfs.KindNotDir, "")
		}
		dir, rest = next, rest[i+1:]
	}
}

// resolve returns the parent of p (nil for the root) and the inode at p
// (nil when only the final component is missing).
func (ns *Namespace) resolve(op string, c *chunkfs.Caller, p string) (parent, n *inode, err error) {
	if err := ValidatePath(op, p); err != nil {
		return nil, nil, err
	}
	if p == "/" {
		return nil, ns.root, nil
	}
	parent, name, err := ns.walk(op, c, p)
	if err != nil {
		return nil, nil, err
	}
	return parent, parent.ext().kids.get(name), nil
}

// existing resolves p and requires it to exist.
func (ns *Namespace) existing(op string, c *chunkfs.Caller, p string) (parent, n *inode, err error) {
	parent, n, err = ns.resolve(op, c, p)
	if err == nil && n == nil {
		err = chunkfs.E(op, p, chunkfs.KindNotExist, "")
	}
	return parent, n, err
}

// source validates c.Target and finds the existing inode at c.Path: the
// first steps of an op that gives an inode, or a copy of it, a new name.
func (ns *Namespace) source(op string, c *Command) (*inode, error) {
	if err := ValidatePath(op, c.Target); err != nil {
		return nil, err
	}
	_, n, err := ns.existing(op, &c.Caller, c.Path)
	return n, err
}

// newName finds the directory that is to hold p, a name that must not
// exist yet, on which the caller needs write and search permission.
func (ns *Namespace) newName(op string, c *chunkfs.Caller, p string) (*inode, error) {
	dir, n, err := ns.resolve(op, c, p)
	switch {
	case err != nil:
		return nil, err
	case n != nil:
		return nil, chunkfs.E(op, p, chunkfs.KindExist, "")
	case !may(c, dir, accessWrite|accessExec):
		return nil, chunkfs.E(op, p, chunkfs.KindPermission, "")
	}
	return dir, nil
}

// info describes n, named name.
func (n *inode) info(name string) chunkfs.FileInfo {
	fi := chunkfs.FileInfo{
		Inode:       n.ino(),
		FileName:    name,
		Length:      n.length,
		FileMode:    n.mode,
		UID:         n.uid,
		GID:         n.gid,
		MTime:       time.Unix(0, n.mtime),
		ATime:       time.Unix(0, n.atime),
		CTime:       time.Unix(0, n.ctime),
		Replication: int(n.repl()),
		Chunks:      int64(len(n.chunks())),
		Nlink:       uint32(n.nlink),
	}
	if n.isDir() {
		fi.Nlink = 2 + uint32(n.ext().kids.Dirs())
	}
	if n.isSymlink() {
		fi.Target = n.ext().target
	}
	if n.isDevice() {
		fi.Rdev = n.ext().rdev
	}
	return fi
}

// Stat describes the file, directory or symbolic link at p (links are not
// followed).
func (ns *Namespace) Stat(c chunkfs.Caller, p string) (chunkfs.FileInfo, error) {
	_, n, err := ns.existing("stat", &c, p)
	if err != nil {
		return chunkfs.FileInfo{}, err
	}
	return n.info(base(p)), nil
}

// List returns up to limit entries of directory p whose names sort after
// after, in name order, and whether more follow. limit is capped at
// MaxListLimit; 0 means the cap.
func (ns *Namespace) List(c chunkfs.Caller, p, after string, limit int) ([]chunkfs.FileInfo, bool, error) {
	const op = "list"
	_, n, err := ns.existing(op, &c, p)
	if err != nil {
		return nil, false, err
	}
	if !n.isDir() {
		return nil, false, chunkfs.E(op, p, chunkfs.KindNotDir, "")
	}
	if !may(&c, n, accessRead) {
		return nil, false, chunkfs.E(op, p, chunkfs.KindPermission, "")
	}
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	var out []chunkfs.FileInfo
	more := false
	n.ext().kids.after(after, func(name string, k *inode) bool {
		if len(out) == limit {
			more = true
			return false
		}
		out = append(out, k.info(name))
		return true
	})
	return out, more, nil
}

// Chunk is one chunk of a file.
type Chunk struct {
	Index   int64
	Handle  chunkfs.Handle
	Version chunkfs.Version
	Shared  bool // held by more than one inode (a snapshot's): a write copies it first
}

// Chunks returns the file at p and its chunks with index in [first,
// first+count), holes left out; count is capped at MaxChunkCount. The
// caller needs read permission, or write permission when write is set.
func (ns *Namespace) Chunks(c chunkfs.Caller, p string, first int64, count int, write bool) (chunkfs.FileInfo, []Chunk, error) {
	const op = "chunks"
	_, n, err := ns.existing(op, &c, p)
	if err != nil {
		return chunkfs.FileInfo{}, nil, err
	}
	if err := fileOnly(op, p, n); err != nil {
		return chunkfs.FileInfo{}, nil, err
	}
	want := uint32(accessRead)
	if write {
		want = accessWrite
	}
	if !may(&c, n, want) {
		return chunkfs.FileInfo{}, nil, chunkfs.E(op, p, chunkfs.KindPermission, "")
	}
	if first < 0 {
		return chunkfs.FileInfo{}, nil, chunkfs.E(op, p, chunkfs.KindInvalid, "negative chunk index")
	}
	if count <= 0 || count > MaxChunkCount {
		count = MaxChunkCount
	}
	var out []Chunk
	for i := first; i < int64(len(n.chunks())) && i < first+int64(count); i++ {
		if r := n.chunks()[i]; r.handle != 0 {
			out = append(out, Chunk{Index: i, Handle: r.handle, Version: r.version, Shared: ns.Refs(r.handle) > 1})
		}
	}
	return n.info(base(p)), out, nil
}

// fileOnly requires n to be a regular file.
func fileOnly(op, p string, n *inode) error {
	switch {
	case n.isDir():
		return chunkfs.E(op, p, chunkfs.KindIsDir, "")
	case n.isSymlink():
		return chunkfs.E(op, p, chunkfs.KindInvalid, "is a symbolic link")
	case n.isSpecial():
		return chunkfs.E(op, p, chunkfs.KindInvalid, "is a fifo or socket")
	}
	return nil
}

// ChunkVersion returns the current version of chunk h and whether any file
// holds it.
func (ns *Namespace) ChunkVersion(h chunkfs.Handle) (chunkfs.Version, bool) {
	n := ns.handles.get(h)
	if n == nil {
		return 0, false
	}
	for _, r := range n.chunks() {
		if r.handle == h {
			return r.version, true
		}
	}
	return 0, false
}

// ChunkFile returns the index of chunk h in its file, the file's length and
// replication, whether only files in the trash hold it (dead), and whether
// h exists. For a chunk several files share (a snapshot's), the length is
// the longest and the replication the highest.
func (ns *Namespace) ChunkFile(h chunkfs.Handle) (index, length int64, repl int, dead, ok bool) {
	dead = true
	ns.holders(h, func(n *inode) {
		for i, r := range n.chunks() {
			if r.handle == h {
				index, ok = int64(i), true
				length, repl = max(length, n.length), max(repl, int(n.repl()))
				dead = dead && n.dead()
			}
		}
	})
	return index, length, repl, dead && ok, ok
}

// EachChunk calls fn for every chunk with its version and its file's
// replication, walking the tree in order (a file with several names at
// its first).
func (ns *Namespace) EachChunk(fn func(h chunkfs.Handle, v chunkfs.Version, repl int)) {
	ns.eachInode(func(n *inode) {
		for _, r := range n.chunks() {
			if r.handle != 0 {
				fn(r.handle, r.version, int(n.repl()))
			}
		}
	})
}

// eachInode calls fn once for every inode, in tree order: parents first,
// entries by name, an inode with several names at its first; then the
// trash's, entry by entry.
func (ns *Namespace) eachInode(fn func(*inode)) {
	var seen map[*inode]bool // inodes with several names, once visited
	var walk func(n *inode)
	walk = func(n *inode) {
		if n.nlink > 1 {
			if seen[n] {
				return
			}
			if seen == nil {
				seen = make(map[*inode]bool)
			}
			seen[n] = true
		}
		fn(n)
		if n.isDir() {
			n.ext().kids.all(func(_ string, k *inode) bool {
				walk(k)
				return true
			})
		}
	}
	walk(ns.root)
	for _, e := range ns.trash.entries {
		walk(e.node)
	}
}
