package master

import (
	"iter"
	"math"
	"slices"

	"github.com/chunkfs/chunkfs"
)

// replicaSet is the replicas one chunkserver holds: chunk handle to
// version. Every chunk has a replica on a few servers, so these sets hold
// most of the registry's entries: a Go map costs about 40 bytes an entry,
// this packs one into 2 to 6 (the handle's low 16 bits, and the version as
// 32 bits unless it is the page's common one), in pages of 65,536
// handles. Handles are handed out in order, so a server's replicas fill
// few pages, and a page's entries are sorted: a look-up is two binary
// searches, an insertion moves at most a page's tail (a full report is
// added in handle order, at the ends). A version that does not fit 32
// bits is kept apart, in a map. The zero value is an empty set.
type replicaSet struct {
	pages []replicaPage // in key order
	n     int
	big   map[chunkfs.Handle]chunkfs.Version // versions of 32 bits or more (bigVersion in the page)
}

// replicaPage holds the replicas of the handles key<<16 to key<<16|0xffff.
// Chunks written once keep the version of their first lease, so most of a
// page's replicas share one version: while vers is nil, a replica's
// version is common unless odd lists it. When odd outgrows a quarter of
// the page, the page keeps every version in vers; fit goes back when one
// version holds three quarters of them.
type replicaPage struct {
	key    uint64
	lows   []uint16 // sorted: the handles' low bits
	vers   []uint32 // nil, or vers[i] is the version of lows[i], or bigVersion
	odd    []oddVersion
	common uint32
}

// oddVersion is a replica's version off its page's common one.
type oddVersion struct {
	lo uint16
	v  uint32
}

// bigVersion marks a version kept in replicaSet.big.
const bigVersion = math.MaxUint32

const pageBits = 16

// minOdd is how many odd versions a page lists at least before it keeps
// every version.
const minOdd = 16

func splitHandle(h chunkfs.Handle) (key uint64, lo uint16) {
	return uint64(h) >> pageBits, uint16(h)
}

// page returns the index of the page of key and whether it exists (if
// not, where it would go).
func (rs *replicaSet) page(key uint64) (int, bool) {
	return slices.BinarySearchFunc(rs.pages, key, func(p replicaPage, k uint64) int {
		switch {
		case p.key < k:
			return -1
		case p.key > k:
			return 1
		}
		return 0
	})
}

// find returns h's page and its slot in it; ok when h is in the set.
func (rs *replicaSet) find(h chunkfs.Handle) (pi, i int, ok bool) {
	key, lo := splitHandle(h)
	pi, found := rs.page(key)
	if !found {
		return pi, 0, false
	}
	i, ok = slices.BinarySearch(rs.pages[pi].lows, lo)
	return pi, i, ok
}

// get returns h's version and whether the set holds h.
func (rs *replicaSet) get(h chunkfs.Handle) (chunkfs.Version, bool) {
	pi, i, ok := rs.find(h)
	if !ok {
		return 0, false
	}
	return rs.version(h, rs.pages[pi].packed(i)), true
}

// at returns h's version, 0 when the set does not hold h (as a map does).
func (rs *replicaSet) at(h chunkfs.Handle) chunkfs.Version {
	v, _ := rs.get(h)
	return v
}

// has reports whether the set holds h.
func (rs *replicaSet) has(h chunkfs.Handle) bool {
	_, _, ok := rs.find(h)
	return ok
}

func (rs *replicaSet) version(h chunkfs.Handle, v uint32) chunkfs.Version {
	if v == bigVersion {
		return rs.big[h]
	}
	return chunkfs.Version(v)
}

// packed returns the 32-bit version of slot i.
func (p *replicaPage) packed(i int) uint32 {
	if p.vers != nil {
		return p.vers[i]
	}
	if j, ok := p.findOdd(p.lows[i]); ok {
		return p.odd[j].v
	}
	return p.common
}

func (p *replicaPage) findOdd(lo uint16) (int, bool) {
	return slices.BinarySearchFunc(p.odd, lo, func(o oddVersion, lo uint16) int { return int(o.lo) - int(lo) })
}

// setOdd records v as lo's version in a page without vers.
func (p *replicaPage) setOdd(lo uint16, v uint32) {
	j, ok := p.findOdd(lo)
	switch {
	case ok && v == p.common:
		p.odd = slices.Delete(p.odd, j, j+1)
	case ok:
		p.odd[j].v = v
	case v != p.common:
		p.odd = slices.Insert(p.odd, j, oddVersion{lo, v})
		if len(p.odd) > max(minOdd, len(p.lows)/4) {
			p.spread()
		}
	}
}

// spread has p keep every version in vers.
func (p *replicaPage) spread() {
	vers := make([]uint32, len(p.lows), cap(p.lows))
	for i := range p.lows {
		vers[i] = p.packed(i)
	}
	p.vers, p.odd = vers, nil
}

// set records that the server holds version v of h.
func (rs *replicaSet) set(h chunkfs.Handle, v chunkfs.Version) {
	packed := uint32(bigVersion)
	if v < bigVersion {
		packed = uint32(v)
	}
	if packed == bigVersion {
		if rs.big == nil {
			rs.big = make(map[chunkfs.Handle]chunkfs.Version)
		}
		rs.big[h] = v
	} else {
		delete(rs.big, h)
	}
	key, lo := splitHandle(h)
	pi, i, ok := rs.find(h)
	if !ok {
		if pi == len(rs.pages) || rs.pages[pi].key != key {
			rs.pages = slices.Insert(rs.pages, pi, replicaPage{key: key, common: packed})
		}
		p := &rs.pages[pi]
		p.lows = slices.Insert(p.lows, i, lo)
		if p.vers != nil {
			p.vers = slices.Insert(p.vers, i, packed)
		}
		rs.n++
	}
	p := &rs.pages[pi]
	if p.vers != nil {
		p.vers[i] = packed
		return
	}
	p.setOdd(lo, packed)
}

// remove forgets h, if the set holds it. A page that empties goes; one
// that shrank to a quarter of its room is copied to a smaller one.
func (rs *replicaSet) remove(h chunkfs.Handle) {
	pi, i, ok := rs.find(h)
	if !ok {
		return
	}
	delete(rs.big, h)
	p := &rs.pages[pi]
	if p.vers != nil {
		p.vers = slices.Delete(p.vers, i, i+1)
	} else if j, ok := p.findOdd(p.lows[i]); ok {
		p.odd = slices.Delete(p.odd, j, j+1)
	}
	p.lows = slices.Delete(p.lows, i, i+1)
	rs.n--
	switch {
	case len(p.lows) == 0:
		rs.pages = slices.Delete(rs.pages, pi, pi+1)
	case cap(p.lows) > 64 && len(p.lows) < cap(p.lows)/4:
		p.lows, p.vers = slices.Clone(p.lows), slices.Clone(p.vers)
	}
	if len(rs.big) == 0 {
		rs.big = nil
	}
}

// len returns how many replicas the set holds.
func (rs *replicaSet) len() int { return rs.n }

// fit copies each page with room to spare to one of its length: a full
// report fills pages by appending, and append leaves up to as much room
// again. New chunks take the highest handles, so it is the last page that
// grows after. A page keeping every version goes back to a common one
// with odd ones listed when one version holds three quarters of them.
func (rs *replicaSet) fit() {
	for i := range rs.pages {
		p := &rs.pages[i]
		if p.vers != nil {
			p.gather()
		}
		if cap(p.lows) > len(p.lows) {
			p.lows = slices.Clip(slices.Clone(p.lows))
		}
		if p.vers != nil && cap(p.vers) > len(p.vers) {
			p.vers = slices.Clip(slices.Clone(p.vers))
		}
		if cap(p.odd) > len(p.odd) {
			p.odd = slices.Clip(slices.Clone(p.odd))
		}
	}
}

// gather lists p's versions as a common one and odd ones, if one version
// (found by majority vote) holds three quarters of them.
func (p *replicaPage) gather() {
	var common uint32
	count := 0
	for _, v := range p.vers {
		switch {
		case count == 0:
			common, count = v, 1
		case v == common:
			count++
		default:
			count--
		}
	}
	var odd []oddVersion
	for i, v := range p.vers {
		if v != common {
			if len(odd) >= len(p.vers)/4 {
				return
			}
			odd = append(odd, oddVersion{p.lows[i], v})
		}
	}
	p.vers, p.odd, p.common = nil, odd, common
}

// all yields every replica in handle order. The set must not change
// while it runs.
func (rs *replicaSet) all() iter.Seq2[chunkfs.Handle, chunkfs.Version] {
	return func(yield func(chunkfs.Handle, chunkfs.Version) bool) {
		for pi := range rs.pages {
			p := &rs.pages[pi]
			j := 0 // the next odd version, while p.vers is nil
			for i, lo := range p.lows {
				v := p.common
				switch {
				case p.vers != nil:
					v = p.vers[i]
				case j < len(p.odd) && p.odd[j].lo == lo:
					v = p.odd[j].v
					j++
				}
				h := chunkfs.Handle(p.key<<pageBits | uint64(lo))
				if !yield(h, rs.version(h, v)) {
					return
				}
			}
		}
	}
}
