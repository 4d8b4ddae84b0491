package master

import (
	"iter"
	"maps"
	"math"
	"slices"

	"github.com/chunkfs/chunkfs"
)

// tableBits sets the size of a chunkTable page: 512 records, 6 KiB.
const tableBits = 9

// chunkInfo is the in-memory part of a chunk: where it lives. The master
// holds one for each of millions of chunks, by value in the chunkTable's
// pages, so it is kept to 12 bytes (TestChunkInfoSize): its first three
// holders as slots of the registry's server table (registry.slots), the
// highest version told as 32 bits, and flags. What only some chunks have
// at a time is kept beside it, by handle: a lease (registry.leases), grants
// in flight (registry.busy), a fourth holder on (registry.more), a version
// told of 32 bits or more (registry.bigTold), a clone in flight
// (registry.clones), when a writer last waited (registry.blockedAt).
type chunkInfo struct {
	told    uint32    // highest version sent to any chunkserver; bigVersion: in registry.bigTold
	holders [3]uint16 // servers that reported or were given a replica: their slots, filled from the start, 0 for none
	corrupt uint8     // corrupt replicas reported and not yet replaced by a clone (at most 255 counted)
	flags   recordFlags
}

// recordFlags are a chunk record's bits.
type recordFlags uint8

const (
	inUse recordFlags = 1 << iota // the slot holds a record
	// fenced is set when the replica set shrank while a lease was out:
	// the survivors must move to a new version before the next write is
	// acknowledged, so that the lost replica is stale if it comes back.
	fenced
	// dirty is set when the replica set changed since plan last found
	// the chunk healthy: plan looks only at these, and at every chunk on
	// a full sweep. The chunkTable counts them by page (markDirty).
	dirty
	moreHolders // holders beyond the first three are in registry.more
)

func (ci *chunkInfo) fence() bool   { return ci.flags&fenced != 0 }
func (ci *chunkInfo) isDirty() bool { return ci.flags&dirty != 0 }

// setFence sets or clears the fence.
func (ci *chunkInfo) setFence(on bool) {
	if on {
		ci.flags |= fenced
	} else {
		ci.flags &^= fenced
	}
}

// chunkTable holds the registry's chunk records by handle. Handles come
// from the namespace's counter, so the records sit by value in pages of
// consecutive handles, 12 bytes a chunk with no pointer (a Go map of
// pointers takes about 25 bytes before the record); a page goes when its
// last record does. It also keeps which records are dirty, counted by
// page, so that the repair planner walks only the pages that hold some.
// A record's address stays its own while its page lives. The zero value
// is empty.
type chunkTable struct {
	pages map[uint64]*tablePage
	n     int
	dirty int // records marked dirty
}

// tablePage is the records of the handles key<<tableBits on.
type tablePage struct {
	recs  [1 << tableBits]chunkInfo
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
	if p == nil || p.recs[i].flags&inUse == 0 {
		return nil
	}
	return &p.recs[i]
}

// add creates h's record, which must not exist, empty and dirty, and
// returns it.
func (t *chunkTable) add(h chunkfs.Handle) *chunkInfo {
	key, i := tableSlot(h)
	if t.pages == nil {
		t.pages = make(map[uint64]*tablePage)
	}
	p := t.pages[key]
	if p == nil {
		p = new(tablePage)
		t.pages[key] = p
	}
	p.recs[i] = chunkInfo{flags: inUse | dirty}
	p.live++
	p.dirty++
	t.n++
	t.dirty++
	return &p.recs[i]
}

// remove forgets h's record, if any.
func (t *chunkTable) remove(h chunkfs.Handle) {
	key, i := tableSlot(h)
	p := t.pages[key]
	if p == nil || p.recs[i].flags&inUse == 0 {
		return
	}
	if p.recs[i].isDirty() {
		p.dirty--
		t.dirty--
	}
	p.recs[i] = chunkInfo{}
	t.n--
	if p.live--; p.live == 0 {
		delete(t.pages, key)
	}
}

// mark sets h's record dirty, if there is one.
func (t *chunkTable) mark(h chunkfs.Handle) {
	key, i := tableSlot(h)
	p := t.pages[key]
	if p == nil || p.recs[i].flags&inUse == 0 || p.recs[i].isDirty() {
		return
	}
	p.recs[i].flags |= dirty
	p.dirty++
	t.dirty++
}

// clean clears h's record's dirty mark, if there is one.
func (t *chunkTable) clean(h chunkfs.Handle) {
	key, i := tableSlot(h)
	p := t.pages[key]
	if p == nil || p.recs[i].flags&inUse == 0 || !p.recs[i].isDirty() {
		return
	}
	p.recs[i].flags &^= dirty
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

func (t *chunkTable) walk(onlyDirty bool) iter.Seq2[chunkfs.Handle, *chunkInfo] {
	return func(yield func(chunkfs.Handle, *chunkInfo) bool) {
		if onlyDirty && t.dirty == 0 {
			return
		}
		for _, key := range slices.Sorted(maps.Keys(t.pages)) {
			p := t.pages[key]
			if p == nil || onlyDirty && p.dirty == 0 {
				continue
			}
			for i := range p.recs {
				if p.live == 0 {
					break // emptied, and gone from the table, while yielding
				}
				ci := &p.recs[i]
				if ci.flags&inUse != 0 && (!onlyDirty || ci.isDirty()) && !yield(chunkfs.Handle(key<<tableBits|uint64(i)), ci) {
					return
				}
			}
		}
	}
}

// maxSlots bounds the server table: a holder's slot is 16 bits, 0 for none.
const maxSlots = math.MaxUint16

// slotOf returns s's slot in the server table, giving it one if it has
// none. Slots of servers the registry forgot are given again (freeSlot).
func (r *registry) slotOf(s *server) uint16 {
	if s.slot != 0 {
		return s.slot
	}
	if n := len(r.free); n > 0 {
		s.slot, r.free = r.free[n-1], r.free[:n-1]
	} else {
		if len(r.slots) == maxSlots {
			panic("master: server table full") // maxServerCount servers and the ones being replaced are far fewer
		}
		r.slots = append(r.slots, nil)
		s.slot = uint16(len(r.slots))
	}
	r.slots[s.slot-1] = s
	return s.slot
}

// freeSlot gives s's slot back, once no record names s (dropServer).
func (r *registry) freeSlot(s *server) {
	if s.slot == 0 {
		return
	}
	r.slots[s.slot-1] = nil
	r.free = append(r.free, s.slot)
	s.slot = 0
}

// holders yields the servers holding h's replicas (ci is h's record) in
// the order they were added. They must not change while it runs.
func (r *registry) holders(h chunkfs.Handle, ci *chunkInfo) iter.Seq[*server] {
	return func(yield func(*server) bool) {
		for _, slot := range ci.holders {
			if slot == 0 || !yield(r.slots[slot-1]) {
				return
			}
		}
		if ci.flags&moreHolders != 0 {
			for _, s := range r.more[h] {
				if !yield(s) {
					return
				}
			}
		}
	}
}

// holderCount returns how many servers hold h's replicas.
func (r *registry) holderCount(h chunkfs.Handle, ci *chunkInfo) int {
	n := 0
	for n < len(ci.holders) && ci.holders[n] != 0 {
		n++
	}
	if ci.flags&moreHolders != 0 {
		n += len(r.more[h])
	}
	return n
}

// appendHolders appends the servers holding h's replicas to buf.
func (r *registry) appendHolders(buf []*server, h chunkfs.Handle, ci *chunkInfo) []*server {
	for s := range r.holders(h, ci) {
		buf = append(buf, s)
	}
	return buf
}

// holds reports whether s holds a replica of h.
func (r *registry) holds(h chunkfs.Handle, ci *chunkInfo, s *server) bool {
	for x := range r.holders(h, ci) {
		if x == s {
			return true
		}
	}
	return false
}

// addHolder puts s at the end of h's holders, if it is not there.
func (r *registry) addHolder(h chunkfs.Handle, ci *chunkInfo, s *server) {
	if r.holds(h, ci, s) {
		return
	}
	for i, slot := range ci.holders {
		if slot == 0 {
			ci.holders[i] = r.slotOf(s)
			return
		}
	}
	if r.more == nil {
		r.more = make(map[chunkfs.Handle][]*server)
	}
	r.more[h] = append(r.more[h], s)
	ci.flags |= moreHolders
}

// removeHolder takes s out of h's holders, keeping the others' order,
// and reports whether it was there.
func (r *registry) removeHolder(h chunkfs.Handle, ci *chunkInfo, s *server) bool {
	if !r.holds(h, ci, s) {
		return false
	}
	var buf [8]*server
	rest := slices.DeleteFunc(r.appendHolders(buf[:0], h, ci), func(x *server) bool { return x == s })
	ci.holders = [3]uint16{}
	ci.flags &^= moreHolders
	delete(r.more, h)
	for _, x := range rest {
		r.addHolder(h, ci, x)
	}
	return true
}

// toldOf returns the highest version told for h (ci is its record).
func (r *registry) toldOf(h chunkfs.Handle, ci *chunkInfo) chunkfs.Version {
	if ci.told == bigVersion {
		return r.bigTold[h]
	}
	return chunkfs.Version(ci.told)
}

// setTold records v as the highest version told for h.
func (r *registry) setTold(h chunkfs.Handle, ci *chunkInfo, v chunkfs.Version) {
	if v < bigVersion {
		ci.told = uint32(v)
		delete(r.bigTold, h)
		return
	}
	if r.bigTold == nil {
		r.bigTold = make(map[chunkfs.Handle]chunkfs.Version)
	}
	ci.told, r.bigTold[h] = bigVersion, v
}
