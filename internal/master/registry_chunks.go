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
// a page goes when its last record does. The zero value is empty.
type chunkTable struct {
	pages map[uint64]tablePage
	n     int
}

// tablePage is the records of the handles key<<tableBits on.
type tablePage struct {
	slots *[1 << tableBits]*chunkInfo
	live  int
}

func tableSlot(h chunkfs.Handle) (key uint64, i int) {
	return uint64(h) >> tableBits, int(h & (1<<tableBits - 1))
}

// get returns h's record, nil if none.
func (t *chunkTable) get(h chunkfs.Handle) *chunkInfo {
	key, i := tableSlot(h)
	p, ok := t.pages[key]
	if !ok {
		return nil
	}
	return p.slots[i]
}

// put makes ci h's record, which must not exist.
func (t *chunkTable) put(h chunkfs.Handle, ci *chunkInfo) {
	key, i := tableSlot(h)
	if t.pages == nil {
		t.pages = make(map[uint64]tablePage)
	}
	p, ok := t.pages[key]
	if !ok {
		p.slots = new([1 << tableBits]*chunkInfo)
	}
	p.slots[i] = ci
	p.live++
	t.pages[key] = p
	t.n++
}

// remove forgets h's record, if any.
func (t *chunkTable) remove(h chunkfs.Handle) {
	key, i := tableSlot(h)
	p, ok := t.pages[key]
	if !ok || p.slots[i] == nil {
		return
	}
	p.slots[i] = nil
	t.n--
	if p.live--; p.live == 0 {
		delete(t.pages, key)
		return
	}
	t.pages[key] = p
}

// len returns how many records the table holds.
func (t *chunkTable) len() int { return t.n }

// all yields every record in handle order. Records may be removed while
// it runs (those not yet reached are then not yielded); one added may be
// yielded or not.
func (t *chunkTable) all() iter.Seq2[chunkfs.Handle, *chunkInfo] {
	return func(yield func(chunkfs.Handle, *chunkInfo) bool) {
		for _, key := range slices.Sorted(maps.Keys(t.pages)) {
			slots := t.pages[key].slots
			for i, ci := range slots {
				if ci != nil && !yield(chunkfs.Handle(key<<tableBits|uint64(i)), ci) {
					return
				}
			}
		}
	}
}
