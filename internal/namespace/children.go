package namespace

import "sort"

// maxBlock is the most entries a block of a children list holds before it
// splits. Blocks keep inserts into million-entry directories cheap (no
// memmove of the whole list) at little cost beyond the entries.
const maxBlock = 512

// dirent is one directory entry: a name and the inode it names.
type dirent struct {
	name string
	n    *inode
}

// children is a directory's entries sorted by name, in blocks: each block is
// sorted, blocks are in order, and no block is empty. It counts the
// entries that are directories, for the directory's link count.
type children struct {
	blocks [][]dirent
	n      int
	dirs   int
}

// Len returns the number of entries.
func (c *children) Len() int { return c.n }

// Dirs returns the number of entries that are directories.
func (c *children) Dirs() int { return c.dirs }

// counted adds delta to the count of entries, and to that of directories
// when n is one.
func (c *children) counted(n *inode, delta int) {
	c.n += delta
	if n.isDir() {
		c.dirs += delta
	}
}

// block returns the index of the block where name is or would be inserted.
func (c *children) block(name string) int {
	b := sort.Search(len(c.blocks), func(i int) bool {
		blk := c.blocks[i]
		return blk[len(blk)-1].name >= name
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
	blk := c.blocks[b]
	i = sort.Search(len(blk), func(j int) bool { return blk[j].name >= name })
	return b, i, i < len(blk) && blk[i].name == name
}

// get returns the inode named name, or nil.
func (c *children) get(name string) *inode {
	b, i, ok := c.find(name)
	if !ok {
		return nil
	}
	return c.blocks[b][i].n
}

// insert adds the entry name → n; name must not be present.
func (c *children) insert(name string, n *inode) {
	c.counted(n, 1)
	e := dirent{name: name, n: n}
	if len(c.blocks) == 0 {
		c.blocks = [][]dirent{{e}}
		return
	}
	b, i, _ := c.find(name)
	blk := append(roomFor1(c.blocks[b]), dirent{})
	copy(blk[i+1:], blk[i:])
	blk[i] = e
	c.blocks[b] = blk
	if len(blk) > maxBlock {
		c.split(b)
	}
}

// roomFor1 returns blk with room for one more entry: when full, copied
// to an array an eighth longer. append doubled it, leaving up to half a
// block spare (a quarter on average, 6 bytes an entry); this costs a copy
// of the block every eighth of its length.
func roomFor1(blk []dirent) []dirent {
	if len(blk) < cap(blk) {
		return blk
	}
	out := make([]dirent, len(blk), len(blk)+len(blk)/8+1)
	copy(out, blk)
	return out
}

// split cuts block b in two halves with their own backing arrays.
func (c *children) split(b int) {
	blk := c.blocks[b]
	half := len(blk) / 2
	lo := append(make([]dirent, 0, half+half/8), blk[:half]...)
	hi := append(make([]dirent, 0, len(blk)-half+half/8), blk[half:]...)
	c.blocks = append(c.blocks, nil)
	copy(c.blocks[b+2:], c.blocks[b+1:])
	c.blocks[b], c.blocks[b+1] = lo, hi
}

// remove deletes the entry named name and reports whether it was there.
func (c *children) remove(name string) bool {
	b, i, ok := c.find(name)
	if !ok {
		return false
	}
	blk := c.blocks[b]
	c.counted(blk[i].n, -1)
	copy(blk[i:], blk[i+1:])
	blk[len(blk)-1] = dirent{}
	blk = blk[:len(blk)-1]
	if len(blk) == 0 {
		c.blocks = append(c.blocks[:b], c.blocks[b+1:]...)
		return true
	}
	c.blocks[b] = blk
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
		for _, e := range c.blocks[b][i:] {
			if !fn(e.name, e.n) {
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
	if last < 0 || len(c.blocks[last]) >= maxBlock/2 {
		c.blocks = append(c.blocks, make([]dirent, 0, min(max(left, 1), maxBlock/2)))
		last++
	}
	c.blocks[last] = append(c.blocks[last], dirent{name: name, n: n})
}

// lastName returns the greatest name, or "" when empty.
func (c *children) lastName() string {
	if len(c.blocks) == 0 {
		return ""
	}
	blk := c.blocks[len(c.blocks)-1]
	return blk[len(blk)-1].name
}
