package master

import (
	"iter"
	"maps"
	"slices"

	"github.com/chunkfs/chunkfs"
)

// tableBits sets the size of a chunkTable page: 512 handles, 4 KiB.
const tableBits = 9

// chunkTable holds the registry's chunk records by handle. Handles come
// from the namespace's counter, so the records sit in pages of
// consecutive handles, 8 bytes a chunk where a Go map takes about 25;
// a page goes when its last record does. It also keeps which records are
// dirty (chunkInfo.dirty), counted by page, so that the repair planner
// walks only the pages that hold some. The zero value is empty.
type chunkTable struct {
	pages map[uint64]*tablePage
	n     int
	dirty int // records marked dirty
}

// tablePage is the records of the handles key<<tableBits on.
type tablePage struct {
	slots [1 << tableBits]*chunkInfo
	live  int
	dirty int // records of the page marked dirty
}

func tableSlot(h chunkfs.Handle) (key uint64, i int) {
	return uint64(h) >> tableBits, int(h & (1<<tableBits - 1))
}

// get returns h's record, nil if none.
func (t *chunkTable) get(h chunkfs.Handle) *chunkInfo {
	key, i := tableSlot(h)
	p := t.pages[key]
	if p == nil {
		return nil
	}
	return p.slots[i]
}

// put makes ci h's record, which must not exist.
func (t *chunkTable) put(h chunkfs.Handle, ci *chunkInfo) {
	key, i := tableSlot(h)
	if t.pages == nil {
		t.pages = make(map[uint64]*tablePage)
	}
	p := t.pages[key]
	if p == nil {
		p = new(tablePage)
		t.pages[key] = p
	}
	p.slots[i] = ci
	p.live++
	t.n++
	if ci.dirty {
		p.dirty++
		t.dirty++
	}
}

// remove forgets h's record, if any.
func (t *chunkTable) remove(h chunkfs.Handle) {
	key, i := tableSlot(h)
	p := t.pages[key]
	if p == nil || p.slots[i] == nil {
		return
	}
	if p.slots[i].dirty {
		p.dirty--
		t.dirty--
	}
	p.slots[i] = nil
	t.n--
	if p.live--; p.live == 0 {
		delete(t.pages, key)
	}
}

// mark sets h's record dirty, if there is one.
func (t *chunkTable) mark(h chunkfs.Handle) {
	key, i := tableSlot(h)
	p := t.pages[key]
	if p == nil || p.slots[i] == nil || p.slots[i].dirty {
		return
	}
	p.slots[i].dirty = true
	p.dirty++
	t.dirty++
}

// clean clears h's record's dirty mark, if there is one.
func (t *chunkTable) clean(h chunkfs.Handle) {
	key, i := tableSlot(h)
	p := t.pages[key]
	if p == nil || p.slots[i] == nil || !p.slots[i].dirty {
		return
	}
	p.slots[i].dirty = false
	p.dirty--
	t.dirty--
}

// len returns how many records the table holds.
func (t *chunkTable) len() int { return t.n }

// dirtyLen returns how many records are marked dirty.
func (t *chunkTable) dirtyLen() int { return t.dirty }

// all yields every record in handle order. Records may be removed while
// it runs (those not yet reached are then not yielded); one added may be
// yielded or not.
func (t *chunkTable) all() iter.Seq2[chunkfs.Handle, *chunkInfo] {
	return t.walk(false)
}

// dirtyOnes yields the records marked dirty in handle order, skipping
// the pages that hold none, as all does.
func (t *chunkTable) dirtyOnes() iter.Seq2[chunkfs.Handle, *chunkInfo] {
	return t.walk(true)
}

func (t *chunkTable) walk(dirty bool) iter.Seq2[chunkfs.Handle, *chunkInfo] {
	return func(yield func(chunkfs.Handle, *chunkInfo) bool) {
		if dirty && t.dirty == 0 {
			return
		}
		for _, key := range slices.Sorted(maps.Keys(t.pages)) {
			p := t.pages[key]
			if p == nil || dirty && p.dirty == 0 {
				continue
			}
			for i, ci := range &p.slots {
				if ci != nil && (!dirty || ci.dirty) && !yield(chunkfs.Handle(key<<tableBits|uint64(i)), ci) {
					return
				}
			}
		}
	}
}

// holderSet is the servers holding a chunk's replicas, in the order
// they were added: the first three in place (a chunk's usual
// replication, with no allocation of their own), any more in a slice
// beside.
type holderSet struct {
	few  [3]*server // filled from the start
	more *[]*server // the fourth on, nil when none
}

// len returns how many servers the set holds.
func (hs *holderSet) len() int {
	n := 0
	for n < len(hs.few) && hs.few[n] != nil {
		n++
	}
	if hs.more != nil {
		n += len(*hs.more)
	}
	return n
}

// all yields the servers in the order they were added. The set must not
// change while it runs.
func (hs *holderSet) all() iter.Seq[*server] {
	return func(yield func(*server) bool) {
		for _, s := range hs.few {
			if s == nil || !yield(s) {
				return
			}
		}
		if hs.more != nil {
			for _, s := range *hs.more {
				if !yield(s) {
					return
				}
			}
		}
	}
}

// appendTo appends the servers to buf.
func (hs *holderSet) appendTo(buf []*server) []*server {
	for s := range hs.all() {
		buf = append(buf, s)
	}
	return buf
}

// contains reports whether s is in the set.
func (hs *holderSet) contains(s *server) bool {
	for x := range hs.all() {
		if x == s {
			return true
		}
	}
	return false
}

// add puts s at the end of the set, if it is not there.
func (hs *holderSet) add(s *server) {
	if hs.contains(s) {
		return
	}
	for i, x := range hs.few {
		if x == nil {
			hs.few[i] = s
			return
		}
	}
	if hs.more == nil {
		hs.more = new([]*server)
	}
	*hs.more = append(*hs.more, s)
}

// remove takes s out of the set, keeping the others' order, and reports
// whether it was there.
func (hs *holderSet) remove(s *server) bool {
	if !hs.contains(s) {
		return false
	}
	var buf [8]*server
	rest := slices.DeleteFunc(hs.appendTo(buf[:0]), func(x *server) bool { return x == s })
	*hs = holderSet{}
	for _, x := range rest {
		hs.add(x)
	}
	return true
}
