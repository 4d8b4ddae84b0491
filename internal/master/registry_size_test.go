package master

import (
	"testing"
	"time"
	"unsafe"
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
