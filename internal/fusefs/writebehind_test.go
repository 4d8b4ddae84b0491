package fusefs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
)

// bytesFile is a File over a byte slice that records its writes.
type bytesFile struct {
	mu     sync.Mutex // guards data, writes and fail
	data   []byte
	writes []extent
	fail   error
}

func (f *bytesFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return copy(p, f.data[min(off, int64(len(f.data))):]), nil
}

func (f *bytesFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return 0, f.fail
	}
	if end := off + int64(len(p)); end > int64(len(f.data)) {
		f.data = append(f.data, make([]byte, end-int64(len(f.data)))...)
	}
	copy(f.data[off:], p)
	f.writes = append(f.writes, extent{off, bytes.Clone(p)})
	return len(p), nil
}

func (f *bytesFile) Sync(ctx context.Context) error { return nil }
func (f *bytesFile) Close() error                   { return nil }
func (f *bytesFile) Moved(path string) error        { return nil }

func (f *bytesFile) contents() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return bytes.Clone(f.data)
}

// apply writes p at off into a model file.
func apply(model []byte, p []byte, off int64) []byte {
	if end := off + int64(len(p)); end > int64(len(model)) {
		model = append(model, make([]byte, end-int64(len(model)))...)
	}
	copy(model[off:], p)
	return model
}

func checkExtents(t *testing.T, w *writeBehind) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	size := 0
	for i, e := range w.dirty {
		size += len(e.data)
		if i > 0 && w.dirty[i-1].end() > e.off {
			t.Fatalf("extents %d and %d overlap: %v", i-1, i, w.dirty)
		}
	}
	if size != w.size {
		t.Fatalf("size %d, extents hold %d", w.size, size)
	}
}

func TestWriteBehindSequentialIsLargeWrites(t *testing.T) {
	f := &bytesFile{}
	w := newWriteBehind(f, 1<<20, 256<<10, time.Minute)
	var model []byte
	block := bytes.Repeat([]byte("x"), 16<<10)
	for off := int64(0); off < 3<<20; off += int64(len(block)) {
		if err := w.buffer(block, off); err != nil {
			t.Fatal(err)
		}
		model = apply(model, block, off)
	}
	if err := w.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.contents(), model) {
		t.Fatal("contents differ")
	}
	for _, e := range f.writes {
		if len(e.data) != 256<<10 || e.off%(256<<10) != 0 {
			t.Errorf("write of %d bytes at %d: want aligned 256 KiB writes", len(e.data), e.off)
		}
	}
}

func TestWriteBehindErrorReachesFlushAndStays(t *testing.T) {
	f := &bytesFile{fail: chunkfs.E("write", "/f", chunkfs.KindUnavailable, "down")}
	w := newWriteBehind(f, 64<<10, 64<<10, time.Minute)
	big := make([]byte, 64<<10)
	if err := w.buffer(big, 0); err != nil {
		t.Fatalf("first write buffers, got %v", err) // the push runs in the background
	}
	err := w.flush(context.Background())
	if chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("flush after a failed push: %v", err)
	}
	if err := w.flush(context.Background()); err == nil {
		t.Fatal("the error was reported once and lost")
	}
	if err := w.buffer([]byte("x"), 0); err == nil {
		t.Fatal("write after a failed push succeeded")
	}
	if errno(err) != syscall.EIO {
		t.Errorf("errno %v, want EIO", errno(err))
	}
}

// outOfOrder returns the offsets of a stream of n blocks of bs bytes in
// the order the kernel's concurrent write-back requests may arrive: each
// run of four swapped end to end.
func outOfOrder(n, bs int) []int64 {
	offs := make([]int64, 0, n)
	for i := 0; i < n; i += 4 {
		for k := min(i+3, n-1); k >= i; k-- {
			offs = append(offs, int64(k*bs))
		}
	}
	return offs
}

// TestWriteBehindOutOfOrderIsLargeWrites: a stream whose writes arrive out
// of order is pushed in the same aligned writes as one in order.
func TestWriteBehindOutOfOrderIsLargeWrites(t *testing.T) {
	f := &bytesFile{}
	w := newWriteBehind(f, 4<<20, 256<<10, time.Minute)
	var model []byte
	const bs = 16 << 10
	for i, off := range outOfOrder(3<<20/bs, bs) {
		block := bytes.Repeat([]byte{byte(i)}, bs)
		if err := w.buffer(block, off); err != nil {
			t.Fatal(err)
		}
		model = apply(model, block, off)
		checkExtents(t, w)
	}
	if err := w.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.contents(), model) {
		t.Fatal("contents differ")
	}
	if len(f.writes) != 12 {
		t.Errorf("%d writes, want 12", len(f.writes))
	}
	for _, e := range f.writes {
		if len(e.data) != 256<<10 || e.off%(256<<10) != 0 {
			t.Errorf("write of %d bytes at %d: want aligned 256 KiB writes", len(e.data), e.off)
		}
	}
}

// BenchmarkWriteBehind buffers and pushes a 64 MiB stream of 128 KiB
// writes (the kernel's write-back requests) in order and out of order; the
// two should cost about the same. "random" is 128 KiB writes in a random
// order, whose fragments the buffer holds until they join.
func BenchmarkWriteBehind(b *testing.B) {
	const bs, total = 128 << 10, 64 << 20
	block := make([]byte, bs)
	for _, c := range []struct {
		name string
		offs []int64
	}{{"in-order", outOfOrder(1, bs)}, {"out-of-order", outOfOrder(total/bs, bs)}, {"random", nil}} {
		switch c.name {
		case "in-order":
			c.offs = c.offs[:0]
			for off := int64(0); off < total; off += bs {
				c.offs = append(c.offs, off)
			}
		case "random":
			for _, k := range rand.New(rand.NewPCG(1, 1)).Perm(total / bs) {
				c.offs = append(c.offs, int64(k*bs))
			}
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(total)
			for range b.N {
				w := newWriteBehind(&discardFile{}, 8<<20, 4<<20, time.Minute)
				for _, off := range c.offs {
					if err := w.buffer(block, off); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.flush(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// discardFile is a File that drops what is written to it.
type discardFile struct{ bytesFile }

func (*discardFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	return len(p), nil
}

func TestWriteBehindDirtyEnd(t *testing.T) {
	w := newWriteBehind(&bytesFile{}, 1<<20, 64<<10, time.Minute)
	if w.dirtyEnd() != 0 || w.hasDirty() {
		t.Fatal("fresh buffer is dirty")
	}
	w.buffer([]byte("abc"), 100)
	w.buffer([]byte("z"), 10)
	if got := w.dirtyEnd(); got != 103 {
		t.Errorf("dirtyEnd = %d, want 103", got)
	}
	if err := w.flush(context.Background()); err != nil || w.hasDirty() {
		t.Errorf("after flush: %v, dirty %v", err, w.hasDirty())
	}
}

// FuzzWriteBehind drives the buffer with random writes and flushes and
// compares the file with a model that applied every write in order.
func FuzzWriteBehind(f *testing.F) {
	f.Add([]byte{0, 10, 5, 1, 3, 20, 2, 0, 200, 9, 9, 9})
	f.Add([]byte{255, 255, 255, 0, 0, 255, 7, 7, 7})
	f.Fuzz(func(t *testing.T, ops []byte) {
		file := &bytesFile{}
		w := newWriteBehind(file, 1500, 64<<10, time.Minute)
		var model []byte
		for i := 0; i+3 <= len(ops); i += 3 {
			off := int64(ops[i]) * 7
			n := int(ops[i+1])
			if n == 0 {
				if err := w.flush(context.Background()); err != nil {
					t.Fatal(err)
				}
				continue
			}
			p := bytes.Repeat([]byte{ops[i+2]}, n)
			if err := w.buffer(p, off); err != nil {
				t.Fatal(err)
			}
			model = apply(model, p, off)
			checkExtents(t, w)
		}
		if err := w.flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := file.contents()
		if !bytes.Equal(got, model) {
			t.Fatalf("file %x\nmodel %x", got, model)
		}
	})
}

func TestErrnoTable(t *testing.T) {
	for k := chunkfs.KindOther; k.Valid(); k++ {
		if _, ok := errnos[k]; !ok {
			t.Errorf("kind %v has no errno", k)
		}
	}
	if errno(nil) != 0 {
		t.Error("nil error has an errno")
	}
	if errno(errors.New("plain")) != syscall.EIO || errno(context.DeadlineExceeded) != syscall.EIO {
		t.Error("errors without a kind must be EIO")
	}
	if errno(chunkfs.E("x", "/", chunkfs.KindNotEmpty, "")) != syscall.ENOTEMPTY {
		t.Error("NotEmpty is not ENOTEMPTY")
	}
	// An interrupted request, however the cancellation was wrapped.
	interrupted := &chunkfs.Error{Op: "truncate", Kind: chunkfs.KindUnavailable, Err: fmt.Errorf("rpc: %w", context.Canceled)}
	if errno(interrupted) != syscall.EINTR || errno(context.Canceled) != syscall.EINTR {
		t.Errorf("a cancelled call is %v, want EINTR", errno(interrupted))
	}
}

// TestWriteBehindHoldsScatteredWrites: a random writer's 16 KiB writes
// over a file the buffer can hold are pushed once they join, in aligned
// writes of the flush size, not one small write each.
func TestWriteBehindHoldsScatteredWrites(t *testing.T) {
	f := &bytesFile{}
	w := newWriteBehind(f, 256<<10, 64<<10, time.Minute)
	const bs, size = 16 << 10, 1536 << 10
	var model []byte
	for i, k := range rand.New(rand.NewPCG(1, 2)).Perm(size / bs) {
		block := bytes.Repeat([]byte{byte(i)}, bs)
		if err := w.buffer(block, int64(k*bs)); err != nil {
			t.Fatal(err)
		}
		model = apply(model, block, int64(k*bs))
		checkExtents(t, w)
	}
	if err := w.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.contents(), model) {
		t.Fatal("contents differ")
	}
	for _, e := range f.writes {
		if len(e.data) != 64<<10 || e.off%(64<<10) != 0 {
			t.Errorf("write of %d bytes at %d: want aligned 64 KiB writes", len(e.data), e.off)
		}
	}
}

// TestWriteBehindHoldIsBounded: fragments that never join are pushed
// once the buffer holds holdFactor times its limit.
func TestWriteBehindHoldIsBounded(t *testing.T) {
	f := &bytesFile{}
	const limit, bs = 64 << 10, 4 << 10
	w := newWriteBehind(f, limit, 64<<10, time.Minute)
	var model []byte
	for off := int64(0); off < 4<<20; off += 2 * bs { // every other block
		block := bytes.Repeat([]byte{byte(off / bs)}, bs)
		if err := w.buffer(block, off); err != nil {
			t.Fatal(err)
		}
		model = apply(model, block, off)
		w.mu.Lock()
		size := w.size
		w.mu.Unlock()
		if size >= holdFactor*limit {
			t.Fatalf("%d bytes buffered after a write, want under %d", size, holdFactor*limit)
		}
	}
	w.mu.Lock()
	w.waitLocked()
	w.mu.Unlock()
	if len(f.writes) == 0 {
		t.Fatal("nothing pushed before the flush")
	}
	if err := w.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.contents(), model) {
		t.Fatal("contents differ")
	}
}

// TestWriteBehindHeldFragmentsFailAtFlush: fragments the buffer holds
// are pushed by flush, whose failure is returned (EIO for an
// unavailable cluster) and stays.
func TestWriteBehindHeldFragmentsFailAtFlush(t *testing.T) {
	f := &bytesFile{}
	w := newWriteBehind(f, 64<<10, 64<<10, time.Minute)
	for off := int64(0); off < 256<<10; off += 32 << 10 { // 16 KiB every 32 KiB: never whole pieces
		if err := w.buffer(make([]byte, 16<<10), off); err != nil {
			t.Fatal(err)
		}
	}
	if !w.hasDirty() || w.dirtyEnd() != 240<<10 {
		t.Fatalf("held fragments: dirty %v, end %d", w.hasDirty(), w.dirtyEnd())
	}
	f.mu.Lock()
	f.fail = chunkfs.E("write", "/f", chunkfs.KindUnavailable, "down")
	f.mu.Unlock()
	err := w.flush(context.Background())
	if errno(err) != syscall.EIO {
		t.Fatalf("flush of held fragments: %v (%v), want EIO", err, errno(err))
	}
	if err := w.flush(context.Background()); errno(err) != syscall.EIO {
		t.Fatalf("second flush: %v, want the error again", err)
	}
	if len(f.writes) != 0 {
		t.Errorf("%d writes reached the file", len(f.writes))
	}
}
