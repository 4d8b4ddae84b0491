package namespace

import "github.com/chunkfs/chunkfs"

// pageBits sets the size of a handle index page: 512 slots, 4 KiB.
const pageBits = 9

// handleIndex maps every live chunk handle to its file. Handles come from a
// counter, so it stores them in pages of consecutive handles (8 bytes a
// chunk, a third of a Go map's cost) found through a small map of pages; a
// page is freed when its last chunk goes.
type handleIndex struct {
	pages map[uint64]*handlePage
	n     int
}

type handlePage struct {
	live   int
	slots  [1 << pageBits]*inode
	shared [1 << pageBits / 64]uint64 // bit set: the chunk has several holders (Namespace.shared lists them)
}

func newHandleIndex() handleIndex { return handleIndex{pages: make(map[uint64]*handlePage)} }

// get returns the file holding h, or nil.
func (x *handleIndex) get(h chunkfs.Handle) *inode {
	p := x.pages[uint64(h)>>pageBits]
	if p == nil {
		return nil
	}
	return p.slots[h&(1<<pageBits-1)]
}

// set records that file n holds h, which must not be present.
func (x *handleIndex) set(h chunkfs.Handle, n *inode) {
	k := uint64(h) >> pageBits
	p := x.pages[k]
	if p == nil {
		p = &handlePage{}
		x.pages[k] = p
	}
	p.slots[h&(1<<pageBits-1)] = n
	p.live++
	x.n++
}

// remove forgets h if present.
func (x *handleIndex) remove(h chunkfs.Handle) {
	k := uint64(h) >> pageBits
	p := x.pages[k]
	if p == nil || p.slots[h&(1<<pageBits-1)] == nil {
		return
	}
	p.slots[h&(1<<pageBits-1)] = nil
	x.markShared(h, false)
	x.n--
	if p.live--; p.live == 0 {
		delete(x.pages, k)
	}
}

// len returns the number of live handles.
func (x *handleIndex) len() int { return x.n }

// replace makes n the file recorded for h, which must be present.
func (x *handleIndex) replace(h chunkfs.Handle, n *inode) {
	if p := x.pages[uint64(h)>>pageBits]; p != nil && p.slots[h&(1<<pageBits-1)] != nil {
		p.slots[h&(1<<pageBits-1)] = n
	}
}

// isShared reports whether h is marked as held by several inodes.
func (x *handleIndex) isShared(h chunkfs.Handle) bool {
	p := x.pages[uint64(h)>>pageBits]
	i := h & (1<<pageBits - 1)
	return p != nil && p.shared[i/64]&(1<<(i%64)) != 0
}

// markShared sets or clears h's shared mark; h must be present.
func (x *handleIndex) markShared(h chunkfs.Handle, on bool) {
	p := x.pages[uint64(h)>>pageBits]
	i := h & (1<<pageBits - 1)
	if on {
		p.shared[i/64] |= 1 << (i % 64)
	} else {
		p.shared[i/64] &^= 1 << (i % 64)
	}
}
