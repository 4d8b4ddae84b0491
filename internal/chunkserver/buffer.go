package chunkserver

import (
	"fmt"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
)

// buffer holds pushed data, keyed by data ID, until a write or append
// applies it. Its total size is bounded: a push that does not fit after
// dropping expired data and data already applied is refused. Data expires
// a fixed time after it arrived.
type buffer struct {
	clock  clock.Clock
	limit  int64
	expiry time.Duration

	mu      sync.Mutex // guards entries and used
	entries map[chunkfs.DataID]*pushed
	used    int64 // bytes reserved by entries
}

// pushed is one buffered push.
type pushed struct {
	data    []byte
	at      time.Time
	ready   bool // the whole data has arrived
	applied bool // a mutation used it; first to go when space is short
}

func newBuffer(c clock.Clock, limit int64, expiry time.Duration) *buffer {
	return &buffer{clock: c, limit: limit, expiry: expiry, entries: make(map[chunkfs.DataID]*pushed)}
}

// reserve makes room for n bytes under id, replacing any earlier push of
// id. done(true) makes the data available; done(false) drops it.
func (b *buffer) reserve(id chunkfs.DataID, n int64) ([]byte, func(ok bool), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropLocked(id)
	if n > b.limit-b.used {
		b.expireLocked(b.clock.Now())
		b.evictAppliedLocked(n)
	}
	if n > b.limit-b.used {
		return nil, nil, chunkfs.E("push", "", chunkfs.KindUnavailable, fmt.Sprintf("push buffer full (%d of %d bytes in use)", b.used, b.limit))
	}
	e := &pushed{data: make([]byte, n), at: b.clock.Now()}
	b.entries[id] = e
	b.used += n
	return e.data, func(ok bool) { b.finish(id, e, ok) }, nil
}

func (b *buffer) finish(id chunkfs.DataID, e *pushed, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.entries[id] != e {
		return // replaced or expired meanwhile
	}
	if ok {
		e.ready = true
	} else {
		b.dropLocked(id)
	}
}

func (b *buffer) dropLocked(id chunkfs.DataID) {
	if e, ok := b.entries[id]; ok {
		b.used -= int64(len(e.data))
		delete(b.entries, id)
	}
}

// expireLocked drops data older than the expiry.
func (b *buffer) expireLocked(now time.Time) {
	for id, e := range b.entries {
		if now.Sub(e.at) >= b.expiry {
			b.dropLocked(id)
		}
	}
}

// evictAppliedLocked drops applied data, oldest first, until n bytes fit.
func (b *buffer) evictAppliedLocked(n int64) {
	for n > b.limit-b.used {
		var oldest chunkfs.DataID
		var at time.Time
		found := false
		for id, e := range b.entries {
			if e.applied && (!found || e.at.Before(at)) {
				oldest, at, found = id, e.at, true
			}
		}
		if !found {
			return
		}
		b.dropLocked(oldest)
	}
}

// expire drops data older than the expiry; the server calls it periodically.
func (b *buffer) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireLocked(b.clock.Now())
}

// get returns the data pushed under id, which must be n bytes long, and
// marks it applied. Missing data is KindUnavailable: the client pushes again.
func (b *buffer) get(id chunkfs.DataID, n int64) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[id]
	if !ok || !e.ready {
		return nil, chunkfs.E("apply", fmt.Sprintf("data %d", id), chunkfs.KindUnavailable, "pushed data not held here (expired or never arrived); push it again")
	}
	if int64(len(e.data)) != n {
		return nil, chunkfs.E("apply", fmt.Sprintf("data %d", id), chunkfs.KindInvalid, fmt.Sprintf("pushed %d bytes, request says %d", len(e.data), n))
	}
	e.applied = true
	return e.data, nil
}

// usage returns the bytes held.
func (b *buffer) usage() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
