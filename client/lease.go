package client

import (
	"sync"
	"time"
)

// leaseCache remembers, per chunk being written, the primary the master
// granted and until when its lease holds, so that a stream of writes to one
// chunk asks the master once per lease rather than once per write. An
// entry is dropped as soon as a write through it fails.
type leaseCache struct {
	mu       sync.Mutex // guards entries and suspects
	entries  map[leaseKey]leaseEntry
	suspects map[leaseKey]string // primaries a write failed with, to name in the next PrepareWrite
}

type leaseKey struct {
	path  string
	index int64
}

type leaseEntry struct {
	loc       *chunkLoc
	chunkSize int64
	until     time.Time
}

// maxLeases bounds the cache; past it, an arbitrary entry is evicted.
const maxLeases = 1024

// leaseMargin is how long before the lease's end the client stops trusting
// it, to allow for clock drift and the time a write takes.
const leaseMargin = 2 * time.Second

func newLeaseCache() *leaseCache {
	return &leaseCache{entries: make(map[leaseKey]leaseEntry), suspects: make(map[leaseKey]string)}
}

// suspect notes that a write to chunk index of path through primary
// failed as if primary were unreachable: the next PrepareWrite names it,
// and the master probes it and moves the lease if it does not answer.
func (lc *leaseCache) suspect(path string, index int64, primary string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if len(lc.suspects) >= maxLeases {
		clear(lc.suspects)
	}
	lc.suspects[leaseKey{path, index}] = primary
}

// takeSuspect returns and forgets the primary suspected for the chunk.
func (lc *leaseCache) takeSuspect(path string, index int64) string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	k := leaseKey{path, index}
	s := lc.suspects[k]
	delete(lc.suspects, k)
	return s
}

func (lc *leaseCache) get(path string, index int64, now time.Time) (*chunkLoc, int64, bool) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	e, ok := lc.entries[leaseKey{path, index}]
	if !ok || !now.Before(e.until) {
		return nil, 0, false
	}
	return e.loc, e.chunkSize, true
}

func (lc *leaseCache) put(path string, index int64, loc *chunkLoc, chunkSize int64, until time.Time) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if len(lc.entries) >= maxLeases {
		for k := range lc.entries {
			delete(lc.entries, k)
			break
		}
	}
	lc.entries[leaseKey{path, index}] = leaseEntry{loc: loc, chunkSize: chunkSize, until: until}
}

func (lc *leaseCache) drop(path string, index int64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	delete(lc.entries, leaseKey{path, index})
}

// dropPath forgets every lease of path (after truncate, rename, delete).
func (lc *leaseCache) dropPath(path string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for k := range lc.entries {
		if k.path == path {
			delete(lc.entries, k)
		}
	}
}
