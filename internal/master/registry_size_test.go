package master

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/placement"
)

// TestChunkInfoSize pins the chunk record at 64 bytes: the master holds
// one a chunk, millions of them.
func TestChunkInfoSize(t *testing.T) {
	if n := unsafe.Sizeof(chunkInfo{}); n != 64 {
		t.Errorf("chunkInfo is %d bytes, want 64", n)
	}
}

// TestStampKeepsTime checks that a stamp gives back the time it was
// made of, before and after the epoch, and orders as times do, with and
// without a monotonic reading.
func TestStampKeepsTime(t *testing.T) {
	for _, base := range []time.Time{time.Unix(1_700_000_000, 123), time.Now()} {
		r := newRegistry(1)
		r.stampOf(base)
		for _, d := range []time.Duration{0, time.Nanosecond, -time.Nanosecond, 90 * time.Second, -time.Hour, 200 * 24 * time.Hour, 30 * 365 * 24 * time.Hour} {
			at := base.Add(d)
			s := r.stampOf(at)
			if got := r.timeOf(s); !got.Equal(at) || got.Sub(base) != d {
				t.Errorf("stamp of base%+v gives back base%+v", d, got.Sub(base))
			}
			if later := r.stampOf(at.Add(time.Nanosecond)); later <= s {
				t.Errorf("base%+v: a nanosecond later stamps %d, not above %d", d, later, s)
			}
		}
	}
}

// TestTidyDirtyFreesTheTable registers 40,000 chunks (all dirty), plans
// them healthy, and checks that the dirty set gives back its table: what
// dropping it frees is far below what a table of 40,000 keys holds.
func TestTidyDirtyFreesTheTable(t *testing.T) {
	const chunks = 40_000
	r := newRegistry(1)
	buildRegistry(t, r, 6, chunks, 3)
	if len(r.dirty) != chunks {
		t.Fatalf("%d chunks dirty after registration, want %d", len(r.dirty), chunks)
	}
	lookup := func(chunkfs.Handle) (chunkfs.Version, int, int64, bool, bool) { return 1, 3, 1 << 20, false, true }
	r.plan(placement.DefaultConfig(), lookup, 2, time.Unix(1000, 0), false)
	if len(r.dirty) != 0 {
		t.Fatalf("%d chunks dirty after a plan found them healthy", len(r.dirty))
	}
	with := liveHeap()
	r.dirty = nil
	freed := with - liveHeap()
	runtime.KeepAlive(r)
	if freed > 64<<10 {
		t.Errorf("the emptied dirty set holds %d bytes", freed)
	}
}

// liveHeap is the live heap after a full collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
