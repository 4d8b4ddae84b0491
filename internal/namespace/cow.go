package namespace

import (
	"slices"
	"strings"

	"github.com/chunkfs/chunkfs"
)

// snapshot makes c.Target a copy of the file or tree at c.Path (GFS §3.4):
// new inodes with the source's attributes, times and extended attributes,
// holding the source's chunks (their reference counts rise), so no data is
// copied until one side writes a shared chunk (copyChunk). Hard links
// inside the source stay links between the copies. The caller needs read
// permission on everything copied (and search on its directories), and
// write and search on the target's directory; the target must not exist
// nor lie inside the source. A refusal changes nothing.
func (ns *Namespace) snapshot(c *Command) Result {
	const op = "snapshot"
	src, dst := c.Path, c.Target
	sn, err := ns.source(op, c)
	if err != nil {
		return Result{Err: err}
	}
	if src == "/" || dst == src || strings.HasPrefix(dst, src+"/") {
		return fail(op, dst, chunkfs.KindInvalid, "the snapshot cannot be inside its source")
	}
	dp, err := ns.newName(op, &c.Caller, dst)
	switch {
	case err != nil:
		return Result{Err: err}
	case !mayCopy(&c.Caller, sn):
		return Result{Err: permission(op, src, "a snapshot needs read permission on everything it copies")}
	}
	count, chunks := treeSize(sn)
	if err := ns.inodesLeft(op, dst, count); err != nil {
		return Result{Err: err}
	}
	cp := ns.copyTree(sn, count, chunks)
	ns.attach(dp, base(dst), cp, c.Time)
	return Result{Info: cp.info(base(dst)), Created: true}
}

// mayCopy reports whether c may read n and, for a directory, everything
// below it.
func mayCopy(c *chunkfs.Caller, n *inode) bool {
	switch {
	case n.isSymlink() || n.isSpecial():
		return true
	case !n.isDir():
		return may(c, n, accessRead)
	case !may(c, n, accessRead|accessExec):
		return false
	}
	ok := true
	n.ext().kids.all(func(_ string, k *inode) bool {
		ok = mayCopy(c, k)
		return ok
	})
	return ok
}

// copier makes the copies of one snapshot. The snapshot of a big tree
// holds the namespace while it applies, so its allocations come from
// slabs sized by a first walk (one allocation for all inodes, one for all
// chunk lists, one for the holder lists of newly shared chunks).
// Cost: a slab lives until its last copy is freed.
type copier struct {
	ns      *Namespace
	links   map[*inode]*inode // inodes with several names already copied → their copies
	inodes  []inode
	chunks  []chunkRef
	holders []*inode
}

// treeSize returns the inodes of n's tree (an inode with several names
// once per name) and the room their chunk lists take.
func treeSize(n *inode) (count, chunks int) {
	walkTree(n, func(k *inode) {
		count++
		chunks += listCap(len(k.chunks()))
	})
	return count, chunks
}

// copyTree returns a copy of n (of its tree, for a directory, of count
// inodes and chunks refs as treeSize counts them) with new inode numbers,
// holding n's chunks.
func (ns *Namespace) copyTree(n *inode, count, chunks int) *inode {
	cp := &copier{ns: ns, links: map[*inode]*inode{}, inodes: make([]inode, count),
		chunks: make([]chunkRef, chunks), holders: make([]*inode, 0, 2*chunks)}
	return cp.copy(n)
}

// walkTree calls fn for n and, for a directory, everything below it (an
// inode with several names once per name).
func walkTree(n *inode, fn func(*inode)) {
	fn(n)
	if n.isDir() {
		n.ext().kids.all(func(_ string, k *inode) bool {
			walkTree(k, fn)
			return true
		})
	}
}

func (cp *copier) copy(n *inode) *inode {
	ns := cp.ns
	if k := cp.links[n]; k != nil {
		return k
	}
	k := &cp.inodes[0]
	cp.inodes = cp.inodes[1:]
	*k = inode{length: n.length, mtime: n.mtime, atime: n.atime, ctime: n.ctime, mode: n.mode, uid: n.uid, gid: n.gid}
	k.setIno(ns.nextInode)
	k.setRepl(n.repl())
	ns.nextInode++
	if n.nlink > 1 {
		cp.links[n] = k
	}
	if n.ext() != nil {
		k.setExt(&ext{target: n.ext().target, rdev: n.ext().rdev, xattrs: slices.Clone(n.ext().xattrs)})
	}
	if m := len(n.chunks()); m > 0 {
		k.setChunks(cp.chunks[:m:listCap(m)])
		cp.chunks = cp.chunks[listCap(m):]
		copy(k.chunks(), n.chunks())
		for _, r := range k.chunks() {
			if r.handle != 0 {
				cp.ref(r.handle, k)
			}
		}
	}
	if !n.isDir() {
		ns.files++
		ns.bytes += n.length
		return k
	}
	ns.dirs++
	left := n.ext().kids.Len()
	n.ext().kids.all(func(name string, c *inode) bool {
		kc := cp.copy(c)
		k.ext().kids.appendSorted(name, kc, left)
		left--
		kc.nlink++
		if kc.isDir() {
			kc.ext().parent = k
		}
		return true
	})
	return k
}

// ref is Namespace.ref with a newly shared chunk's holder list from the
// slab.
func (cp *copier) ref(h chunkfs.Handle, k *inode) {
	x := &cp.ns.handles
	if hs := x.holdersOf(h); hs != nil {
		x.setHolders(h, append(hs, k))
		return
	}
	i := len(cp.holders)
	cp.holders = append(cp.holders, x.get(h), k)
	x.setHolders(h, cp.holders[i:i+2:i+2])
}

// reserveHandle takes the next chunk handle for a copy-on-write copy that
// the master is about to make (copy first, log the copy after: a copy on
// a chunkserver that was never logged is garbage, a logged handle with no
// replica would be data lost).
func (ns *Namespace) reserveHandle() Result {
	if !ns.Initialized() {
		return fail("reserve handle", "", chunkfs.KindUnavailable, "namespace not initialised")
	}
	h := ns.nextHandle
	ns.nextHandle++
	return Result{Chunk: Chunk{Handle: h}}
}

// copyChunk makes the file at c.Path hold c.NewHandle, a copy the
// chunkservers made of its shared chunk c.Handle at c.Version, in place of
// c.Handle, whose reference count falls by one. It refuses (KindStale) when
// the file no longer holds c.Handle, when the chunk is no longer shared,
// or when its version moved since the copy was made; then the copy is
// garbage.
func (ns *Namespace) copyChunk(c *Command) Result {
	const op = "copy chunk"
	n, err := ns.writable(op, c)
	if err != nil {
		return Result{Err: err}
	}
	i := slices.IndexFunc(n.chunks(), func(r chunkRef) bool { return r.handle == c.Handle })
	switch {
	case c.Handle == 0 || i < 0:
		return fail(op, c.Path, chunkfs.KindStale, "the file no longer holds the chunk")
	case ns.Refs(c.Handle) < 2:
		return fail(op, c.Path, chunkfs.KindStale, "the chunk is no longer shared")
	case n.chunks()[i].version != c.Version:
		return fail(op, c.Path, chunkfs.KindStale, "the chunk's version moved after it was copied")
	case c.NewHandle == 0 || c.NewHandle >= ns.nextHandle || ns.handles.get(c.NewHandle) != nil:
		return fail(op, c.Path, chunkfs.KindInvalid, "the copy's handle was not reserved or is in use")
	}
	ns.touch(n)
	ns.unref(c.Handle, n)
	n.chunks()[i] = chunkRef{handle: c.NewHandle, version: c.Version}
	ns.ref(c.NewHandle, n)
	return Result{Info: n.info(base(c.Path)), Chunk: Chunk{Index: int64(i), Handle: c.NewHandle, Version: c.Version}}
}

// TreeChunks calls fn for every chunk of the file or tree at p (a chunk of
// a file with several names once per name inside the tree), after
// checking that c may read it all: the chunks a snapshot of p would share.
func (ns *Namespace) TreeChunks(c chunkfs.Caller, p string, fn func(chunkfs.Handle)) error {
	const op = "snapshot"
	_, n, err := ns.existing(op, &c, p)
	if err != nil {
		return err
	}
	if !mayCopy(&c, n) {
		return permission(op, p, "a snapshot needs read permission on everything it copies")
	}
	walkTree(n, func(k *inode) {
		for _, r := range k.chunks() {
			if r.handle != 0 {
				fn(r.handle)
			}
		}
	})
	return nil
}
