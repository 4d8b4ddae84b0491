package namespace

import (
	"sort"
	"unsafe"
)

// maxBlock is the most entries a block of a children list holds before it
// splits. Blocks keep inserts into million-entry directories cheap (no
// memmove of the whole list) at little cost beyond the entries.
const maxBlock = 512

// dirent is one directory entry: the inode it names and where its name
// is in its block's names.
type dirent struct {
	n    *inode
	off  uint32
	size uint8 // names are at most chunkfs.MaxNameLen (255) bytes
}

// block is a sorted run of a directory's entries and their names, end to
// end in one array: 16 bytes an entry and its name's bytes, where a
// string and a pointer took 24 and an allocation of the name. Bytes of
// names are only ever appended, never written over: a name handed out
// (block.name) stays as it was, and a block with half its names dead is
// copied to new arrays.
type block struct {
	ents  []dirent
	names []byte
	dead  int // bytes of names no entry uses
}

// name returns entry i's name: a view of the block's bytes, which never
// change.
func (b *block) name(i int) string {
	e := b.ents[i]
	return unsafe.String(&b.names[e.off], int(e.size))
}

// entry appends name to the block's names and returns the entry naming n
// by it. The names grow by an eighth when full.
func (b *block) entry(name string, n *inode) dirent {
	if len(b.names)+len(name) > cap(b.names) {
		grown := make([]byte, len(b.names), len(b.names)+len(b.names)/8+len(name))
		copy(grown, b.names)
		b.names = grown
	}
	e := dirent{n: n, off: uint32(len(b.names)), size: uint8(len(name))}
	b.names = append(b.names, name...)
	return e
}

// compacted returns a copy of ents, with room for spare more, and of
// their names alone.
func (b *block) compacted(ents []dirent, spare int) block {
	size := 0
	for _, e := range ents {
		size += int(e.size)
	}
	out := block{ents: make([]dirent, 0, len(ents)+spare), names: make([]byte, 0, size)}
	for i := range ents {
		e := ents[i]
		out.ents = append(out.ents, out.entry(unsafe.String(&b.names[e.off], int(e.size)), e.n))
	}
	return out
}

// children is a directory's entries sorted by name, in blocks: each block is
// sorted, blocks are in order, and no block is empty. It counts the
// entries that are directories, for the directory's link count.
type children struct {
	blocks []block
	n      int32 // 32 bits, so that an ext fits 96 bytes (TestExtSize): 2^31 entries would not fit the heap
	dirs   int32
}

// Len returns the number of entries.
func (c *children) Len() int { return int(c.n) }

// Dirs returns the number of entries that are directories.
func (c *children) Dirs() int { return int(c.dirs) }

// counted adds delta to the count of entries, and to that of directories
// when n is one.
func (c *children) counted(n *inode, delta int32) {
	c.n += delta
	if n.isDir() {
		c.dirs += delta
	}
}

// block returns the index of the block where name is or would be inserted.
func (c *children) block(name string) int {
	b := sort.Search(len(c.blocks), func(i int) bool {
		blk := &c.blocks[i]
		return blk.name(len(blk.ents)-1) >= name
	})
	if b == len(c.blocks) && b > 0 {
		b--
	}
	return b
}

// find returns the position of name, or where it would go, and whether it
// is present.
func (c *children) find(name string) (b, i int, ok bool) {
	if len(c.blocks) == 0 {
		return 0, 0, false
	}
	b = c.block(name)
	blk := &c.blocks[b]
	i = sort.Search(len(blk.ents), func(j int) bool { return blk.name(j) >= name })
	return b, i, i < len(blk.ents) && blk.name(i) == name
}

// get returns the inode named name, or nil.
func (c *children) get(name string) *inode {
	b, i, ok := c.find(name)
	if !ok {
		return nil
	}
	return c.blocks[b].ents[i].n
}

// insert adds the entry name → n; name must not be present.
func (c *children) insert(name string, n *inode) {
	c.counted(n, 1)
	if len(c.blocks) == 0 {
		var blk block
		blk.ents = []dirent{blk.entry(name, n)}
		c.blocks = []block{blk}
		return
	}
	b, i, _ := c.find(name)
	blk := &c.blocks[b]
	e := blk.entry(name, n)
	ents := append(roomFor1(blk.ents), dirent{})
	copy(ents[i+1:], ents[i:])
	ents[i] = e
	blk.ents = ents
	if len(ents) > maxBlock {
		c.split(b)
	}
}

// roomFor1 returns ents with room for one more entry: when full, copied
// to an array an eighth longer. append doubled it, leaving up to half a
// block spare (a quarter on average); this costs a copy of the block
// every eighth of its length.
func roomFor1(ents []dirent) []dirent {
	if len(ents) < cap(ents) {
		return ents
	}
	out := make([]dirent, len(ents), len(ents)+len(ents)/8+1)
	copy(out, ents)
	return out
}

// split cuts block b in two halves with arrays of their own, an eighth
// of room spare in each.
func (c *children) split(b int) {
	blk := c.blocks[b]
	half := len(blk.ents) / 2
	lo := blk.compacted(blk.ents[:half], half/8)
	hi := blk.compacted(blk.ents[half:], half/8)
	c.blocks = append(c.blocks, block{})
	copy(c.blocks[b+2:], c.blocks[b+1:])
	c.blocks[b], c.blocks[b+1] = lo, hi
}

// remove deletes the entry named name and reports whether it was there.
// A block whose names are half dead, or with room for more than a
// quarter of its entries (twice what growth leaves), is copied without
// the dead names and with an eighth of room.
func (c *children) remove(name string) bool {
	b, i, ok := c.find(name)
	if !ok {
		return false
	}
	blk := &c.blocks[b]
	c.counted(blk.ents[i].n, -1)
	blk.dead += int(blk.ents[i].size)
	copy(blk.ents[i:], blk.ents[i+1:])
	blk.ents[len(blk.ents)-1] = dirent{}
	blk.ents = blk.ents[:len(blk.ents)-1]
	switch {
	case len(blk.ents) == 0:
		c.blocks = append(c.blocks[:b], c.blocks[b+1:]...)
	case blk.dead > len(blk.names)/2 || cap(blk.ents)-len(blk.ents) > len(blk.ents)/4+4:
		*blk = blk.compacted(blk.ents, len(blk.ents)/8)
	}
	return true
}

// after calls fn for each entry whose name sorts after name (all entries
// when name is empty), in order, until fn returns false.
func (c *children) after(name string, fn func(name string, n *inode) bool) {
	b, i := 0, 0
	if name != "" && len(c.blocks) > 0 {
		var ok bool
		b, i, ok = c.find(name)
		if ok {
			i++
		}
	}
	for ; b < len(c.blocks); b, i = b+1, 0 {
		blk := &c.blocks[b]
		for ; i < len(blk.ents); i++ {
			if !fn(blk.name(i), blk.ents[i].n) {
				return
			}
		}
	}
}

// all calls fn for every entry in order until it returns false.
func (c *children) all(fn func(name string, n *inode) bool) { c.after("", fn) }

// appendSorted adds the entry name → n after every entry; name must sort
// after them all, and left counts the entries still to be appended, this
// one included. Restoring a snapshot builds lists this way, in full
// blocks of half the most a block holds, each allocated for the entries
// it will hold (a directory of 100 entries takes 100 slots, not 256).
func (c *children) appendSorted(name string, n *inode, left int) {
	c.counted(n, 1)
	last := len(c.blocks) - 1
	if last < 0 || len(c.blocks[last].ents) >= maxBlock/2 {
		c.blocks = append(c.blocks, block{ents: make([]dirent, 0, min(max(left, 1), maxBlock/2))})
		last++
	}
	blk := &c.blocks[last]
	blk.ents = append(blk.ents, blk.entry(name, n))
}

// lastName returns the greatest name, or "" when empty.
func (c *children) lastName() string {
	if len(c.blocks) == 0 {
		return ""
	}
	blk := &c.blocks[len(c.blocks)-1]
	return blk.name(len(blk.ents) - 1)
}
