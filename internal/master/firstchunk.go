package master

import (
	"context"
	"sync"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// placeFirst places the chunk 0 that create r of path p allocated
// (FlagFirstChunk) at the version the create logged, as an allocation's
// own placement does, so the file's first PrepareWrite finds it placed
// under a lease and logs nothing. It is best effort: a create succeeds
// whatever happens here. A placement that fails (safe mode, too few
// servers) leaves the chunk unplaced, and its first writer places it at a
// new version, as after any failed placement. Under the file's allocation
// stripe, as ensureChunk, so one of them places it.
func (m *Master) placeFirst(ctx context.Context, p string, r namespace.Result) {
	mu := &m.allocMu[pathStripe(p)]
	mu.Lock()
	defer mu.Unlock()
	if m.placed(r.Chunk) || !m.firsts.take(r.Chunk.Handle) {
		return
	}
	if err := m.placeChunk(ctx, p, r.Chunk, r.Info.Replication, false); err != nil {
		m.cfg.Logger.DebugContext(ctx, "first chunk not placed at create; its first write places it", "path", p, "handle", r.Chunk.Handle, "err", err)
	}
}

// firstChunks remembers the chunks a create allocated (FlagFirstChunk)
// that no chunkserver has been told of yet. The first placement of such a
// chunk (placeFirst, or a PrepareWrite racing it) places it at the version
// the create logged, with no entry of its own, as an allocation's own
// placement does; any other unplaced chunk may have been told to a server
// before (a placement that failed, or another leader's) and is placed at
// a new version, logged. A handle
// allocated before this master last took over is never taken (ensureChunk
// checks the handle floor), so a marker from an earlier term is harmless.
//
// The set is bounded: a file created and never written keeps its marker
// until maxFirstChunks later creates push it out, and a chunk whose marker
// is gone is placed as any other (one entry more, never less safe).
type firstChunks struct {
	mu   sync.Mutex // guards set, ring and next
	set  map[chunkfs.Handle]struct{}
	ring []chunkfs.Handle // the handles added, oldest overwritten first
	next int
}

// maxFirstChunks bounds firstChunks: about 1.5 MiB of heap when full.
const maxFirstChunks = 1 << 16

// add remembers h.
func (f *firstChunks) add(h chunkfs.Handle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.set == nil {
		f.set = make(map[chunkfs.Handle]struct{})
		f.ring = make([]chunkfs.Handle, maxFirstChunks)
	}
	if old := f.ring[f.next]; old != 0 {
		delete(f.set, old)
	}
	f.ring[f.next] = h
	f.next = (f.next + 1) % len(f.ring)
	f.set[h] = struct{}{}
}

// take reports whether h was remembered, and forgets it: one placement
// only may use it.
func (f *firstChunks) take(h chunkfs.Handle) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.set[h]; !ok {
		return false
	}
	delete(f.set, h)
	return true
}
