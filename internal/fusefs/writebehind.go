package fusefs

import (
	"bytes"
	"context"
	"slices"
	"sort"
	"sync"
	"time"
)

// writeBehind buffers the writes of one open file and pushes them to the
// cluster in large writes, split at multiples of flushSize so that none
// straddles a chunk. While one batch is pushed in the background the next
// one fills; a writer waits only when both are full. The first error of a
// push is kept and returned by every later write and flush, so it reaches
// close(2) or fsync(2) and is never lost.
//
// A full buffer pushes the whole flushSize-aligned pieces its runs of
// touching extents cover and holds the rest, up to holdFactor times limit
// in all: a random writer's fragments, each a write to every replica of
// its own, then join into whole pieces as its later writes fill the gaps
// (the kernel's write-back sends a random writer's pages long before
// close).
type writeBehind struct {
	f         File
	limit     int           // buffered bytes that start a push
	flushSize int           // largest single write, a power of two
	timeout   time.Duration // bound of a background push
	parallel  int           // writes in flight during a push
	hold      int           // buffered bytes that push fragments too

	mu       sync.Mutex // guards the fields below
	idle     sync.Cond  // signalled when a background push ends
	dirty    []extent   // sorted by offset, not overlapping (touching ones are joined by split)
	size     int        // bytes in dirty
	next     int        // size at which buffer looks for runs to push
	pushing  bool       // a background push is in flight
	inFlight int64      // end of the batch being pushed
	err      error      // first failed push
	// spare is a batch-sized buffer a finished push gave back, reused by
	// the next batch: memory the process touched already, where a fresh
	// allocation costs a page fault per page (a large share of a
	// stream's cost in a virtual machine).
	spare []byte
}

// extent is a run of buffered bytes at an offset.
type extent struct {
	off  int64
	data []byte
}

func (e extent) end() int64 { return e.off + int64(len(e.data)) }

// holdFactor times the buffer's limit is how many bytes it holds before
// it pushes fragments too.
const holdFactor = 8

func newWriteBehind(f File, limit, flushSize int, timeout time.Duration) *writeBehind {
	w := &writeBehind{f: f, limit: limit, flushSize: flushSize, timeout: timeout, parallel: 4,
		hold: holdFactor * limit, next: limit}
	w.idle.L = &w.mu
	return w
}

// write buffers p at off (writer).
func (w *writeBehind) write(_ context.Context, p []byte, off int64) (int, error) {
	if err := w.buffer(p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}

// buffer buffers a copy of p at off, starting a background push of its
// runs once the buffer is full.
func (w *writeBehind) buffer(p []byte, off int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.insertLocked(p, off)
	if w.size < w.next {
		return nil
	}
	w.waitLocked()
	batch, end := w.takeRunsLocked()
	if len(batch) == 0 {
		return nil
	}
	w.pushing, w.inFlight = true, end
	go w.pushInBackground(batch)
	return nil
}

// takeRunsLocked takes the whole flushSize-aligned pieces of the runs,
// or every extent once the buffer holds hold bytes, and sets the size at
// which buffer looks again: limit more than what stays.
func (w *writeBehind) takeRunsLocked() ([]extent, int64) {
	if w.size >= w.hold {
		return w.takeLocked()
	}
	fs := int64(w.flushSize)
	var batch, keep []extent
	kept := 0
	for i := 0; i < len(w.dirty); {
		j := i + 1
		for j < len(w.dirty) && w.dirty[j-1].end() == w.dirty[j].off {
			j++
		}
		lo, hi := w.dirty[i].off, w.dirty[j-1].end()
		a, b := (lo+fs-1)/fs*fs, hi/fs*fs
		for _, e := range w.dirty[i:j] {
			if b <= a { // no whole piece in the run
				keep, kept = append(keep, e), kept+len(e.data)
				continue
			}
			head, mid := cut(e, a)
			mid, tail := cut(mid, b)
			batch = appendData(batch, mid)
			for _, k := range []extent{head, tail} {
				if len(k.data) > 0 {
					// A copy: the pushed part's buffer is recycled.
					keep, kept = append(keep, extent{k.off, bytes.Clone(k.data)}), kept+len(k.data)
				}
			}
		}
		i = j
	}
	w.dirty, w.size, w.next = keep, kept, kept+w.limit
	var end int64
	if n := len(batch); n > 0 {
		end = batch[n-1].end()
	}
	return batch, end
}

// cut splits e at off: the bytes before it and from it on.
func cut(e extent, off int64) (before, after extent) {
	k := min(max(off-e.off, 0), int64(len(e.data)))
	return extent{e.off, e.data[:k]}, extent{e.off + k, e.data[k:]}
}

// appendData appends e to batch unless it is empty.
func appendData(batch []extent, e extent) []extent {
	if len(e.data) == 0 {
		return batch
	}
	return append(batch, e)
}

// flush pushes everything buffered and waits for it; it returns the first
// error of any push since the file was opened.
func (w *writeBehind) flush(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waitLocked()
	if batch, _ := w.takeLocked(); len(batch) > 0 {
		w.failLocked(w.push(ctx, batch))
		w.recycleLocked(batch)
	}
	return w.err
}

// dirtyEnd returns the end of the furthest byte not yet pushed, or 0.
func (w *writeBehind) dirtyEnd() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	end := w.inFlight
	if n := len(w.dirty); n > 0 {
		end = max(end, w.dirty[n-1].end())
	}
	return end
}

// hasDirty reports whether bytes wait to be pushed.
func (w *writeBehind) hasDirty() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pushing || len(w.dirty) > 0
}

func (w *writeBehind) waitLocked() {
	for w.pushing {
		w.idle.Wait()
	}
}

func (w *writeBehind) takeLocked() ([]extent, int64) {
	batch := w.dirty
	var end int64
	if n := len(batch); n > 0 {
		end = batch[n-1].end()
	}
	w.dirty, w.size, w.next = nil, 0, w.limit
	return batch, end
}

func (w *writeBehind) reported() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = nil
}

func (w *writeBehind) failLocked(err error) {
	if err != nil && w.err == nil {
		w.err = err
	}
}

func (w *writeBehind) pushInBackground(batch []extent) {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	err := w.push(ctx, batch)
	cancel()
	w.mu.Lock()
	w.recycleLocked(batch)
	w.failLocked(err)
	w.pushing, w.inFlight = false, 0
	w.idle.Broadcast()
	w.mu.Unlock()
}

// push writes a batch with up to w.parallel writes in flight. The extents
// do not overlap, so their order does not matter.
func (w *writeBehind) push(ctx context.Context, batch []extent) error {
	pieces := split(batch, w.flushSize)
	sem := make(chan struct{}, w.parallel)
	errs := make(chan error, len(pieces))
	for _, p := range pieces {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := w.f.WriteAt(ctx, p.data, p.off)
			errs <- err
		}()
	}
	var first error
	for range pieces {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// split cuts a batch's extents at multiples of size, and joins the
// pieces of touching extents between two multiples into one write.
func split(batch []extent, size int) []extent {
	var out []extent
	joined := map[int]bool{} // pieces of out with a buffer of their own
	for _, e := range batch {
		for len(e.data) > 0 {
			n := min(size-int(e.off%int64(size)), len(e.data))
			if k := len(out) - 1; k >= 0 && out[k].end() == e.off && e.off%int64(size) != 0 {
				if !joined[k] {
					// A buffer of its own, with room up to the next
					// multiple of size: later joins copy only theirs.
					prev := out[k].data
					room := size - int(out[k].off%int64(size))
					out[k].data = append(make([]byte, 0, room), prev...)
					joined[k] = true
				}
				out[k].data = append(out[k].data, e.data[:n]...)
			} else {
				out = append(out, extent{e.off, e.data[:n]})
			}
			e.off, e.data = e.off+int64(n), e.data[n:]
		}
	}
	return out
}

// insertLocked copies p into the buffer at off. Appending to (or
// overwriting within) the last extent, the common case of a sequential
// writer, copies p once; so does a write that overlaps no extent, which
// becomes one of its own even where it touches others: the kernel's
// write-back sends a stream's requests concurrently, so they arrive out of
// order, and joining each to its neighbours would copy them again and
// again (split joins them once, when they are pushed). A write that
// overlaps extents is merged with them.
func (w *writeBehind) insertLocked(p []byte, off int64) {
	if len(p) == 0 {
		return // writes nothing, and does not extend the file
	}
	end := off + int64(len(p))
	if n := len(w.dirty); n > 0 {
		last := &w.dirty[n-1]
		if off >= last.off && off <= last.end() {
			w.size -= len(last.data)
			keep := int(off - last.off)
			if end >= last.end() {
				last.data = w.appendGrow(last.data[:keep], p)
			} else {
				copy(last.data[keep:], p)
			}
			w.size += len(last.data)
			return
		}
	}
	i := sort.Search(len(w.dirty), func(i int) bool { return w.dirty[i].end() > off })
	j := i
	for j < len(w.dirty) && w.dirty[j].off < end {
		j++
	}
	if i == j {
		w.size += len(p)
		w.dirty = slices.Insert(w.dirty, i, extent{off, bytes.Clone(p)})
		return
	}
	lo, hi := off, end
	if i < j {
		lo, hi = min(lo, w.dirty[i].off), max(hi, w.dirty[j-1].end())
	}
	buf := make([]byte, hi-lo)
	for _, e := range w.dirty[i:j] {
		copy(buf[e.off-lo:], e.data)
		w.size -= len(e.data)
	}
	copy(buf[off-lo:], p)
	w.size += len(buf)
	w.dirty = slices.Replace(w.dirty, i, j, extent{lo, buf})
}

// appendGrow appends p to b, at least doubling b's capacity when it must
// grow: a sequential writer's extent is then copied about once in all,
// where append's gentler growth for large slices copies it several times.
// Once an extent reaches a quarter of the buffer's limit it grows straight
// to the largest size a batch reaches (limit plus one more write), so the
// kernel's write-back requests fill it without further copies. The spare
// buffer, which has that size, is taken at the first growth.
func (w *writeBehind) appendGrow(b, p []byte) []byte {
	if need := len(b) + len(p); need > cap(b) {
		c := max(need, 2*cap(b), 64<<10)
		if c > w.limit/4 {
			c = max(need, w.limit+maxWriteSize)
		}
		var nb []byte
		if cap(w.spare) >= c {
			nb, w.spare = w.spare[:len(b)], nil
		} else {
			nb = make([]byte, len(b), c)
		}
		copy(nb, b)
		b = nb
	}
	return append(b, p...)
}

// maxWriteSize is the largest write the kernel sends (Config.MaxWrite's
// bound).
const maxWriteSize = 1 << 20

// recycleLocked keeps the largest buffer of a pushed batch as the spare
// one. WriteAt does not retain what it is given (io.WriterAt).
func (w *writeBehind) recycleLocked(batch []extent) {
	for _, e := range batch {
		if cap(e.data) >= w.limit+maxWriteSize && cap(e.data) > cap(w.spare) {
			w.spare = e.data[:0]
		}
	}
}
