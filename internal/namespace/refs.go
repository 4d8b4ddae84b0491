package namespace

import (
	"slices"

	"github.com/chunkfs/chunkfs"
)

// Chunk reference counts. A snapshot makes several inodes hold one chunk
// (copy-on-write); the chunk is garbage only when the last of them lets go
// of it. Most chunks have one holder, so the count is not stored per chunk:
// the handle index names the first holder, and, for a chunk with more,
// marks it and lists every holder in its page (handles.go), so an
// unshared chunk costs nothing extra and a shared one no hashing. A
// chunk's reference count is the length of that list, else 1. The counts
// are not in checkpoints: they are a function of which inodes list which
// handles, and Restore derives them.

// ref records that n holds h (n must not hold it already).
func (ns *Namespace) ref(h chunkfs.Handle, n *inode) {
	first := ns.handles.get(h)
	if first == nil {
		ns.handles.set(h, n)
		return
	}
	hs := ns.handles.holdersOf(h)
	if hs == nil {
		hs = []*inode{first}
	}
	ns.handles.setHolders(h, append(hs, n))
}

// unref records that n no longer holds h and reports whether h became
// garbage (n was its last holder).
func (ns *Namespace) unref(h chunkfs.Handle, n *inode) bool {
	hs := ns.handles.holdersOf(h)
	if hs == nil {
		ns.handles.remove(h)
		ns.heldGone(h)
		return true
	}
	if i := slices.Index(hs, n); i >= 0 {
		hs = slices.Delete(hs, i, i+1)
	}
	ns.handles.replace(h, hs[0])
	if len(hs) == 1 {
		hs = nil
	}
	ns.handles.setHolders(h, hs)
	return false
}

// Refs returns chunk h's reference count: the inodes that hold it, 0 when
// none does.
func (ns *Namespace) Refs(h chunkfs.Handle) int {
	if hs := ns.handles.holdersOf(h); hs != nil {
		return len(hs)
	}
	if ns.handles.get(h) != nil {
		return 1
	}
	return 0
}

// holders calls fn for every inode that holds h.
func (ns *Namespace) holders(h chunkfs.Handle, fn func(*inode)) {
	if hs := ns.handles.holdersOf(h); hs != nil {
		for _, n := range hs {
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
	if hs := ns.handles.holdersOf(h); hs != nil {
		return slices.Contains(hs, n)
	}
	return ns.handles.get(h) == n
}

// SharedChunks returns the number of chunks held by more than one inode.
func (ns *Namespace) SharedChunks() int { return ns.handles.shared }
