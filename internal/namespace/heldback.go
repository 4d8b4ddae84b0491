package namespace

import (
	"cmp"
	"slices"

	"github.com/chunkfs/chunkfs"
)

// Held-back replicas. A replica that left a chunk's counted set while a
// lease was out, or whose grant answer was lost, may miss writes
// acknowledged at the version it holds: it must never be counted at that
// version again. The leader logs the fact (OpHoldBack) before it hands
// out a chain that leaves the replica out, so that a master taking over
// does not count it at that version when its server reports it. A fact
// lives until the chunk's logged version passes it (the replica is stale
// by version then) or the chunk goes.

// HeldBack is one held-back replica: the chunkserver holding it (its ID)
// and the version at or below which it is not counted.
type HeldBack struct {
	Server  string
	Version chunkfs.Version
}

// Bounds on the held-back facts: per chunk (a chunk has a few replicas)
// and in all.
const (
	MaxHeldBackPerChunk = 16
	MaxHeldBack         = 1 << 20
)

// holdBack records (OpHoldBack) that chunkserver c.Path's replica of chunk
// c.Handle is not counted at c.Version or below. A version below the
// chunk's logged one changes nothing (the replica is stale by version
// already); a later one for the same server raises the fact's version.
func (ns *Namespace) holdBack(c *Command) Result {
	const op = "hold back"
	id := c.Path
	switch cur, ok := ns.ChunkVersion(c.Handle); {
	case id == "" || len(id) > MaxServerIDLen:
		return fail(op, id, chunkfs.KindInvalid, "chunkserver ID empty or too long")
	case c.Version == 0:
		return fail(op, id, chunkfs.KindInvalid, "version 0")
	case !ok:
		return fail(op, id, chunkfs.KindNotExist, "no such chunk")
	case c.Version < cur:
		return Result{}
	}
	list := ns.held[c.Handle]
	if i := slices.IndexFunc(list, func(b HeldBack) bool { return b.Server == id }); i >= 0 {
		list[i].Version = max(list[i].Version, c.Version)
		return Result{}
	}
	if len(list) >= MaxHeldBackPerChunk || ns.heldCount >= MaxHeldBack {
		return fail(op, id, chunkfs.KindNoSpace, "too many held-back replicas")
	}
	if ns.held == nil {
		ns.held = make(map[chunkfs.Handle][]HeldBack)
	}
	i, _ := slices.BinarySearchFunc(list, id, func(b HeldBack, id string) int { return cmp.Compare(b.Server, id) })
	ns.held[c.Handle] = slices.Insert(list, i, HeldBack{Server: id, Version: c.Version})
	ns.heldCount++
	return Result{}
}

// heldMoved drops chunk h's held-back facts below version v, its logged
// version now.
func (ns *Namespace) heldMoved(h chunkfs.Handle, v chunkfs.Version) {
	list, ok := ns.held[h]
	if !ok {
		return
	}
	kept := slices.DeleteFunc(list, func(b HeldBack) bool { return b.Version < v })
	ns.heldCount -= len(list) - len(kept)
	if len(kept) == 0 {
		delete(ns.held, h)
	} else {
		ns.held[h] = kept
	}
}

// heldGone drops chunk h's held-back facts: no file holds it any more.
func (ns *Namespace) heldGone(h chunkfs.Handle) {
	if list, ok := ns.held[h]; ok {
		ns.heldCount -= len(list)
		delete(ns.held, h)
	}
}

// HeldBackOf returns chunk h's held-back replicas, sorted by server ID;
// nil when none. The slice is the namespace's: not to be changed, nor kept
// past the read lock.
func (ns *Namespace) HeldBackOf(h chunkfs.Handle) []HeldBack { return ns.held[h] }

// HeldBackChunk is the held-back replicas of one chunk.
type HeldBackChunk struct {
	Handle   chunkfs.Handle
	Replicas []HeldBack
}

// HeldBackAll returns every chunk's held-back replicas, in handle order.
func (ns *Namespace) HeldBackAll() []HeldBackChunk {
	out := make([]HeldBackChunk, 0, len(ns.held))
	for h, list := range ns.held {
		out = append(out, HeldBackChunk{Handle: h, Replicas: slices.Clone(list)})
	}
	slices.SortFunc(out, func(a, b HeldBackChunk) int { return cmp.Compare(a.Handle, b.Handle) })
	return out
}

// IsHeldBack reports whether chunkserver id's replica of h at v is held
// back.
func (ns *Namespace) IsHeldBack(h chunkfs.Handle, id string, v chunkfs.Version) bool {
	for _, b := range ns.held[h] {
		if b.Server == id {
			return v <= b.Version
		}
	}
	return false
}
