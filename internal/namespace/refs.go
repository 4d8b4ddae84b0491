package namespace

import (
	"slices"

	"github.com/chunkfs/chunkfs"
)

// Chunk reference counts. A snapshot makes several inodes hold one chunk
// (copy-on-write); the chunk is garbage only when the last of them lets go
// of it. Most chunks have one holder, so the count is not stored per chunk:
// the handle index names the first holder, and shared lists every holder
// of a chunk that has more than one (and marks it in the index, so that
// the common unshared chunk costs no map look-up). A chunk's reference
// count is len(shared[h]) when present, else 1. The counts are not in checkpoints:
// they are a function of which inodes list which handles, and Restore
// derives them.

// ref records that n holds h (n must not hold it already).
func (ns *Namespace) ref(h chunkfs.Handle, n *inode) {
	first := ns.handles.get(h)
	if first == nil {
		ns.handles.set(h, n)
		return
	}
	if ns.shared == nil {
		ns.shared = make(map[chunkfs.Handle][]*inode)
	}
	if !ns.handles.isShared(h) {
		ns.handles.markShared(h, true)
		ns.shared[h] = []*inode{first, n}
		return
	}
	ns.shared[h] = append(ns.shared[h], n)
}

// unref records that n no longer holds h and reports whether h became
// garbage (n was its last holder).
func (ns *Namespace) unref(h chunkfs.Handle, n *inode) bool {
	if !ns.handles.isShared(h) {
		ns.handles.remove(h)
		return true
	}
	hs := ns.shared[h]
	if i := slices.Index(hs, n); i >= 0 {
		hs = slices.Delete(hs, i, i+1)
	}
	ns.handles.replace(h, hs[0])
	if len(hs) == 1 {
		delete(ns.shared, h)
		ns.handles.markShared(h, false)
	} else {
		ns.shared[h] = hs
	}
	return false
}

// Refs returns chunk h's reference count: the inodes that hold it, 0 when
// none does.
func (ns *Namespace) Refs(h chunkfs.Handle) int {
	if ns.handles.isShared(h) {
		return len(ns.shared[h])
	}
	if ns.handles.get(h) != nil {
		return 1
	}
	return 0
}

// holders calls fn for every inode that holds h.
func (ns *Namespace) holders(h chunkfs.Handle, fn func(*inode)) {
	if ns.handles.isShared(h) {
		for _, n := range ns.shared[h] {
			fn(n)
		}
		return
	}
	if n := ns.handles.get(h); n != nil {
		fn(n)
	}
}

// holds reports whether n holds h.
func (ns *Namespace) holds(h chunkfs.Handle, n *inode) bool {
	if ns.handles.isShared(h) {
		return slices.Contains(ns.shared[h], n)
	}
	return ns.handles.get(h) == n
}

// SharedChunks returns the number of chunks held by more than one inode.
func (ns *Namespace) SharedChunks() int { return len(ns.shared) }
