package chunkserver

import (
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// buffer holds pushed data, keyed by data ID, until a write or append
// applies it. Its total size is bounded: a push that does not fit after
// dropping expired data is refused. Data expires a fixed time after the
// last of it arrived, however long the push took (a push still arriving is
// bounded by its connection's frame timeout, not by the expiry: on a
// congested network a push can take longer than the expiry, and the data
// is no less wanted for it), and is consumed by the mutation that applies
// it (a client that retries pushes again). Memory is recycled through size-class pools, so a
// steady stream of pushes neither zeroes nor faults in fresh pages.
type buffer struct {
	clock  clock.Clock
	limit  int64
	expiry time.Duration
	pools  [numClasses]sync.Pool // of *[]byte, by size class

	mu      sync.Mutex // guards entries and used
	entries map[chunkfs.DataID]*pushed
	used    int64 // capacity of the entries and of data taken but not released
}

// Size classes: powers of two from 64 KiB to the largest push.
const (
	minClassShift = 16
	numClasses    = 27 - minClassShift // 1<<26 = rpc.MaxPushSize
)

// pushed is one buffered push.
type pushed struct {
	data  []byte
	sums  []uint32  // block checksums from the frames, or nil
	at    time.Time // when the whole data arrived
	ready bool      // the whole data has arrived
}

func newBuffer(c clock.Clock, limit int64, expiry time.Duration) *buffer {
	return &buffer{clock: c, limit: limit, expiry: expiry, entries: make(map[chunkfs.DataID]*pushed)}
}

// class returns the size class of n bytes, or -1 if n is not pooled (too
// small to be worth it, or too large).
func class(n int64) int {
	if n < 1<<minClassShift {
		return -1
	}
	c := bits.Len64(uint64(n-1)) - minClassShift
	if c >= numClasses || n > rpc.MaxPushSize {
		return -1
	}
	return c
}

// alloc returns n bytes, from the pool when it has some.
func (b *buffer) alloc(n int64) []byte {
	c := class(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := b.pools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, int64(1)<<(c+minClassShift))
}

// recycle returns data, no longer referenced anywhere, to its pool.
func (b *buffer) recycle(data []byte) {
	c := class(int64(cap(data)))
	if c >= 0 && cap(data) == 1<<(c+minClassShift) {
		b.pools[c].Put(&data)
	}
}

// reserve makes room for n bytes under id, replacing any earlier push of
// id. done(sums, true) makes the data (and its block sums, if known)
// available; done(nil, false) drops it.
func (b *buffer) reserve(id chunkfs.DataID, n int64) ([]byte, func(sums []uint32, ok bool), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropLocked(id)
	size := n
	if c := class(n); c >= 0 {
		size = 1 << (c + minClassShift)
	}
	if size > b.limit-b.used {
		b.expireLocked(b.clock.Now())
	}
	if size > b.limit-b.used {
		return nil, nil, chunkfs.E("push", "", chunkfs.KindUnavailable, fmt.Sprintf("push buffer full (%d of %d bytes in use)", b.used, b.limit))
	}
	e := &pushed{data: b.alloc(n)}
	b.entries[id] = e
	b.used += int64(cap(e.data))
	return e.data, func(sums []uint32, ok bool) { b.finish(id, e, sums, ok) }, nil
}

func (b *buffer) finish(id chunkfs.DataID, e *pushed, sums []uint32, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.entries[id] != e {
		// Replaced or expired while arriving: the data was not recycled
		// then (it was still being written), so it can be now.
		b.recycle(e.data)
		return
	}
	if ok {
		e.ready, e.sums, e.at = true, sums, b.clock.Now()
	} else {
		b.dropLocked(id)
	}
}

// dropLocked forgets id, recycling its data once the push is complete.
func (b *buffer) dropLocked(id chunkfs.DataID) {
	e, ok := b.entries[id]
	if !ok {
		return
	}
	b.used -= int64(cap(e.data))
	delete(b.entries, id)
	if e.ready {
		b.recycle(e.data)
	}
}

// expireLocked drops data that arrived longer than the expiry ago.
func (b *buffer) expireLocked(now time.Time) {
	for id, e := range b.entries {
		if e.ready && now.Sub(e.at) >= b.expiry {
			b.dropLocked(id)
		}
	}
}

// expire drops data older than the expiry; the server calls it periodically.
func (b *buffer) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expireLocked(b.clock.Now())
}

// take removes and returns the data pushed under id, which must be n bytes
// long, with its block sums if known; release must be called once the data
// is no longer used. Missing data is KindUnavailable: the client pushes
// again.
func (b *buffer) take(id chunkfs.DataID, n int64) (data []byte, sums []uint32, release func(), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[id]
	if !ok || !e.ready {
		return nil, nil, nil, chunkfs.E("apply", fmt.Sprintf("data %d", id), chunkfs.KindUnavailable, "pushed data not held here (expired, used, or never arrived); push it again")
	}
	if int64(len(e.data)) != n {
		return nil, nil, nil, chunkfs.E("apply", fmt.Sprintf("data %d", id), chunkfs.KindInvalid, fmt.Sprintf("pushed %d bytes, request says %d", len(e.data), n))
	}
	delete(b.entries, id)
	return e.data, e.sums, func() { b.release(e.data) }, nil
}

func (b *buffer) release(data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= int64(cap(data))
	b.recycle(data)
}

// usage returns the bytes held.
func (b *buffer) usage() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
