package master

import "github.com/chunkfs/chunkfs"

// safeCount is the registry's running count of located chunks, for safe
// mode (safemode.go): of the chunks that hold data, at their logged
// version (want, taken from the namespace), those with a live replica at
// that version. A chunk becomes located when its first such replica is
// recorded and stops being so when its last is dropped, so each change of
// a replica costs O(its holders) and asking the count O(1), where a walk
// of every chunk would cost O(chunks) at every registration.
type safeCount struct {
	gen     uint64                         // the namespace's chunk generation want was taken at (state.chunkGen)
	want    map[chunkfs.Handle]wantedChunk // chunks that hold data
	located int                            // how many of want are located
}

// wantedChunk is one chunk safe mode waits for.
type wantedChunk struct {
	version chunkfs.Version // its logged version
	located bool            // a live replica at version is recorded
}

// startCount starts counting the located chunks among want (chunk →
// logged version), taken from the namespace at chunk generation gen.
func (r *registry) startCount(gen uint64, want map[chunkfs.Handle]chunkfs.Version) {
	c := &safeCount{gen: gen, want: make(map[chunkfs.Handle]wantedChunk, len(want))}
	for h, v := range want {
		loc := r.locatedAt(h, v)
		c.want[h] = wantedChunk{version: v, located: loc}
		if loc {
			c.located++
		}
	}
	r.safe = c
}

// stopCount stops counting: safe mode is over.
func (r *registry) stopCount() { r.safe = nil }

// safeCounted returns the chunks safe mode waits for and how many of them are
// located, if a count taken at chunk generation gen is running (ok).
func (r *registry) safeCounted(gen uint64) (total, located int, ok bool) {
	if r.safe == nil || r.safe.gen != gen {
		return 0, 0, false
	}
	return len(r.safe.want), r.safe.located, true
}

// recount updates the count after a change to h's replicas.
func (r *registry) recount(h chunkfs.Handle) {
	if r.safe == nil {
		return
	}
	w, ok := r.safe.want[h]
	if !ok {
		return
	}
	loc := r.locatedAt(h, w.version)
	if loc == w.located {
		return
	}
	w.located = loc
	r.safe.want[h] = w
	if loc {
		r.safe.located++
	} else {
		r.safe.located--
	}
}

// locatedAt reports whether a live server holds version v of h.
func (r *registry) locatedAt(h chunkfs.Handle, v chunkfs.Version) bool {
	ci := r.chunks.get(h)
	if ci == nil {
		return false
	}
	for s := range r.holders(h, ci) {
		if s.alive && s.chunks.at(h) == v {
			return true
		}
	}
	return false
}

// counting reports whether a count is running.
func (r *registry) counting() bool { return r.safe != nil }
