package namespace

import (
	"slices"

	"github.com/chunkfs/chunkfs"
)

// pageBits sets the size of a handle index page: 512 slots, 4 KiB.
const pageBits = 9

// handleIndex maps every live chunk handle to its file. Handles come from a
// counter, so it stores them in pages of consecutive handles (8 bytes a
// chunk, a third of a Go map's cost) found through a small map of pages; a
// page is freed when its last chunk goes.
type handleIndex struct {
	pages  map[uint64]*handlePage
	n      int
	shared int // chunks with several holders
}

type handlePage struct {
	live    int
	slots   [1 << pageBits]*inode
	marks   [1 << pageBits / 64]uint64 // bit set: the chunk has several holders, listed in holders
	holders []sharedSlot               // sorted by slot
}

// sharedSlot lists every holder of a chunk several inodes hold (the first
// is the one in slots).
type sharedSlot struct {
	slot uint16
	hs   []*inode
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

// isShared reports whether h has several holders.
func (x *handleIndex) isShared(h chunkfs.Handle) bool {
	p := x.pages[uint64(h)>>pageBits]
	i := h & (1<<pageBits - 1)
	return p != nil && p.marks[i/64]&(1<<(i%64)) != 0
}

// holdersOf returns every holder of h when it has several, else nil.
func (x *handleIndex) holdersOf(h chunkfs.Handle) []*inode {
	if !x.isShared(h) {
		return nil
	}
	p := x.pages[uint64(h)>>pageBits]
	j, _ := p.find(uint16(h & (1<<pageBits - 1)))
	return p.holders[j].hs
}

// setHolders records hs (two or more) as h's holders, or, with hs nil,
// that h has one holder again; h must be present.
func (x *handleIndex) setHolders(h chunkfs.Handle, hs []*inode) {
	p := x.pages[uint64(h)>>pageBits]
	i := uint16(h & (1<<pageBits - 1))
	j, found := p.find(i)
	switch {
	case hs == nil && found:
		p.holders = slices.Delete(p.holders, j, j+1)
		p.marks[i/64] &^= 1 << (i % 64)
		x.shared--
	case hs == nil:
	case found:
		p.holders[j].hs = hs
	default:
		p.holders = slices.Insert(p.holders, j, sharedSlot{slot: i, hs: hs})
		p.marks[i/64] |= 1 << (i % 64)
		x.shared++
	}
}

// find returns where slot i is or would go in p.holders.
func (p *handlePage) find(i uint16) (int, bool) {
	if n := len(p.holders); n > 0 && p.holders[n-1].slot < i {
		return n, false // the common case: a snapshot shares handles in rising order
	}
	return slices.BinarySearchFunc(p.holders, i, func(s sharedSlot, i uint16) int { return int(s.slot) - int(i) })
}

// eachShared calls fn for every chunk with several holders.
func (x *handleIndex) eachShared(fn func(h chunkfs.Handle, hs []*inode)) {
	for k, p := range x.pages {
		for _, s := range p.holders {
			fn(chunkfs.Handle(k<<pageBits|uint64(s.slot)), s.hs)
		}
	}
}
