package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
)

// fakeReplicas serves chunk data (byte i is byte(i*7+i>>16)) from named
// replicas, each with its own length, failure and gate, and counts the
// pieces each one served.
type fakeReplicas struct {
	length map[string]int           // where each replica's data ends
	fail   map[string]chunkfs.Kind  // replicas that fail every read
	gate   map[string]chan struct{} // replicas whose first read waits for it
	perMiB map[string]time.Duration // time a replica takes per MiB served

	mu      sync.Mutex // guards served, bytes, tries
	served  map[string]int
	bytes   map[string]int
	tries   map[string]int
	onServe func(f *fakeReplicas) // called with mu held after each success
}

func byteAt(i int64) byte { return byte(i*7 + i>>16) }

func (f *fakeReplicas) ReadToken(ctx context.Context, addr string, _ chunkfs.Handle, _ chunkfs.Version, off int64, p []byte, _ []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, &chunkfs.Error{Op: "read", Kind: chunkfs.KindUnavailable, Err: err}
	}
	f.mu.Lock()
	f.tries[addr]++
	first := f.tries[addr] == 1
	f.mu.Unlock()
	if g := f.gate[addr]; g != nil && first {
		select {
		case <-g:
		case <-ctx.Done():
			return 0, &chunkfs.Error{Op: "read", Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
		}
	}
	if d := f.perMiB[addr]; d > 0 {
		time.Sleep(d * time.Duration(len(p)) >> 20)
	}
	if k, ok := f.fail[addr]; ok {
		return 0, chunkfs.E("read", addr, k, "injected failure")
	}
	n := 0
	for ; n < len(p) && off+int64(n) < int64(f.length[addr]); n++ {
		p[n] = byteAt(off + int64(n))
	}
	f.mu.Lock()
	f.served[addr]++
	f.bytes[addr] += n
	if f.onServe != nil {
		f.onServe(f)
	}
	f.mu.Unlock()
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func newFakeClient(lengths map[string]int) (*Client, *fakeReplicas, *chunkLoc) {
	f := &fakeReplicas{length: lengths, fail: map[string]chunkfs.Kind{}, gate: map[string]chan struct{}{},
		served: map[string]int{}, bytes: map[string]int{}, tries: map[string]int{}}
	// The fakes test the scheduling of pieces, not replica deadlines
	// (hung_test.go does): under the race detector on a busy machine a
	// fake region can take longer than replicaFloor.
	c := &Client{reader: f, log: slog.New(slog.DiscardHandler), clock: clock.Real{}, floor: time.Minute}
	loc := &chunkLoc{handle: 1, version: 1, replicas: []string{"a", "b", "c"}}
	return c, f, loc
}

func checkBytes(t *testing.T, buf []byte, off int64, dataEnd int64) {
	t.Helper()
	for i := range buf {
		want := byte(0)
		if pos := off + int64(i); pos < dataEnd {
			want = byteAt(pos)
		}
		if buf[i] != want {
			t.Fatalf("byte %d = %d, want %d", off+int64(i), buf[i], want)
		}
	}
}

// TestParallelReadBalances: while one replica is stuck on its first piece,
// the others take every other piece of a large region.
func TestParallelReadBalances(t *testing.T) {
	const size = 4 << 20
	c, f, loc := newFakeClient(map[string]int{"a": size, "b": size, "c": size})
	g := make(chan struct{})
	f.gate["a"] = g
	f.onServe = func(f *fakeReplicas) {
		// a's first piece is a full one: the rest is left when it starts.
		if f.served["a"] == 0 && f.bytes["b"]+f.bytes["c"] == size-readPieceSize {
			close(g)
		}
	}
	buf := make([]byte, size)
	if err := c.readReplicas(context.Background(), "/f", loc, 0, buf); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, buf, 0, size)
	if f.served["a"] != 1 || f.bytes["a"] != readPieceSize {
		t.Fatalf("pieces served: %v, bytes %v; want a: one piece (it was stuck)", f.served, f.bytes)
	}
}

// TestParallelReadRescuesStuckPiece: a replica that never answers its
// first piece does not hold the region up: once the others have read the
// rest, one of them reads that piece again, the stuck request is cancelled,
// and the region is whole.
func TestParallelReadRescuesStuckPiece(t *testing.T) {
	const size = 2 << 20
	c, f, loc := newFakeClient(map[string]int{"a": size, "b": size, "c": size})
	f.gate["a"] = make(chan struct{}) // never closed: a's first read waits for its context
	buf := make([]byte, size)
	if err := c.readReplicas(context.Background(), "/f", loc, 0, buf); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, buf, 0, size)
	if f.served["a"] != 0 || f.tries["a"] != 1 || f.bytes["b"]+f.bytes["c"] != size {
		t.Fatalf("served %v, bytes %v, tries %v: want a asked once, never answering, b and c serving all", f.served, f.bytes, f.tries)
	}
}

// TestPieceSchedRescueRule: an idle worker rescues only a piece that is
// both rescueAfter old and rescueMargin times what it would take itself,
// never its own, and each piece once; with nothing in flight it stops.
func TestPieceSchedRescueRule(t *testing.T) {
	s := newPieceSched(1<<20, 3)
	now := time.Unix(100, 0)
	if f, wait := s.idle(1, now); f != nil || wait != nil {
		t.Fatal("nothing in flight, yet the worker does not stop")
	}
	f := s.fly(0, 0, 512<<10, now, func() {})
	s.done(1, 1<<20, time.Second) // 1 MiB/s: 0.5 s for the piece
	if g, wait := s.idle(1, now.Add(1900*time.Millisecond)); g != nil || wait == nil {
		t.Fatal("rescued a piece under rescueMargin times the idle replica's time")
	}
	if g, _ := s.idle(0, now.Add(time.Hour)); g != nil {
		t.Fatal("a worker rescued its own piece")
	}
	if g, _ := s.idle(2, now.Add(time.Hour)); g != nil {
		t.Fatal("a worker with no rate yet rescued a piece")
	}
	if g, _ := s.idle(1, now.Add(2100*time.Millisecond)); g != f {
		t.Fatal("a piece 4 times late was not rescued")
	}
	s.done(2, 1<<20, time.Second)
	if g, _ := s.idle(2, now.Add(time.Hour)); g != nil {
		t.Fatal("a piece was rescued twice")
	}
	if !s.claim(f) || s.claim(f) {
		t.Fatal("a piece claimed twice, or not at all")
	}
	if g, wait := s.idle(1, now.Add(time.Hour)); g != nil || wait != nil {
		t.Fatal("nothing in flight after the claim, yet the worker does not stop")
	}
}

// TestPieceSchedEqualRates: with replicas answering at one rate, a region
// is cut into full pieces first and smaller ones towards its end, every
// piece aligned and within bounds, covering the region exactly once.
func TestPieceSchedEqualRates(t *testing.T) {
	const size = 4 << 20
	s := newPieceSched(size, 3)
	var sizes []int
	next := 0
	for w := 0; ; w = (w + 1) % 3 {
		lo, hi := s.take(w)
		if lo == hi {
			break
		}
		if lo != next {
			t.Fatalf("piece [%d, %d) after %d", lo, hi, next)
		}
		next = hi
		sizes = append(sizes, hi-lo)
		s.done(w, hi-lo, time.Duration(hi-lo)*time.Microsecond) // 1 MB/s each
	}
	if next != size {
		t.Fatalf("pieces cover %d bytes, want %d", next, size)
	}
	for i, n := range sizes {
		if n%readPieceAlign != 0 || n < readPieceMin || n > readPieceSize+readPieceMin {
			t.Fatalf("piece %d of %d bytes: sizes %v", i, n, sizes)
		}
		if i > 0 && n > sizes[i-1] {
			t.Fatalf("pieces grow: %v", sizes)
		}
	}
	if sizes[0] != readPieceSize || sizes[len(sizes)-1] >= readPieceSize {
		t.Fatalf("sizes %v: want full pieces first, smaller ones last", sizes)
	}
}

// TestPieceSchedSlowReplica: towards the end of a region a replica four
// times slower than another gets a piece a quarter of its (or the
// minimum), and a worker that stopped no longer counts.
func TestPieceSchedSlowReplica(t *testing.T) {
	s := newPieceSched(2<<20, 3)
	s.next = 1 << 20 // 1 MiB left
	s.done(0, 1, time.Second/4)
	s.done(1, 1, time.Second)
	s.done(2, 1, time.Second)
	if _, hi := s.take(1); hi != 1<<20+readPieceMin {
		t.Fatalf("slow replica's piece ends at %d, want %d (1/12 of 1 MiB is under the minimum)", hi, 1<<20+readPieceMin)
	}
	lo, hi := s.take(0)
	if hi-lo != 320<<10 {
		t.Fatalf("fast replica's piece: %d bytes, want %d (1/3 of the 896 KiB left, aligned)", hi-lo, 320<<10)
	}
	s.stop(0)
	s.stop(1)
	end := hi
	for {
		lo, hi := s.take(2)
		if lo == hi {
			break
		}
		if lo != end || hi-lo > (2<<20-lo+1)/2+readPieceAlign && hi != 2<<20 {
			t.Fatalf("the last worker left got [%d, %d) after %d", lo, hi, end)
		}
		end = hi
	}
	if end != 2<<20 {
		t.Fatalf("the last worker left read up to %d, want %d", end, 2<<20)
	}
}

// TestParallelReadFailsOver: pieces whose replica fails come from the
// others, and a failed replica stops taking pieces.
func TestParallelReadFailsOver(t *testing.T) {
	const size = 3<<20 + 1000
	c, f, loc := newFakeClient(map[string]int{"a": size, "b": size, "c": size})
	f.fail["a"] = chunkfs.KindUnavailable
	f.fail["c"] = chunkfs.KindStale
	buf := make([]byte, size-100)
	if err := c.readReplicas(context.Background(), "/f", loc, 100, buf); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, buf, 100, size)
	if f.tries["a"] > 2 || f.tries["c"] > 1 {
		t.Fatalf("failed replicas kept taking pieces: tries %v", f.tries)
	}
	// With every replica failing, the region fails (the caller retries).
	f.fail["b"] = chunkfs.KindUnavailable
	if err := c.readReplicas(context.Background(), "/f", loc, 0, buf); chunkfs.KindOf(err) != chunkfs.KindUnavailable && chunkfs.KindOf(err) != chunkfs.KindStale {
		t.Fatalf("all replicas failing: %v", err)
	}
}

// TestParallelReadShortReplicas: where the chunk's data ends the region
// reads as zeros, and a replica that missed a write loses to a longer one.
func TestParallelReadShortReplicas(t *testing.T) {
	const end = 3<<19 + 5 // 1.5 MiB and a bit
	c, _, loc := newFakeClient(map[string]int{"a": end, "b": 1 << 20, "c": end})
	for _, order := range [][]string{{"a", "b", "c"}, {"b", "a", "c"}} {
		loc.replicas = order
		buf := make([]byte, 4<<20)
		for i := range buf {
			buf[i] = 0xff
		}
		if err := c.readReplicas(context.Background(), "/f", loc, 0, buf); err != nil {
			t.Fatal(err)
		}
		checkBytes(t, buf, 0, end)
	}
}

// TestParallelReadCanceled: a read whose context ends midway fails; it
// never returns a partly filled region as success.
func TestParallelReadCanceled(t *testing.T) {
	const size = 4 << 20
	c, f, loc := newFakeClient(map[string]int{"a": size, "b": size, "c": size})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.onServe = func(*fakeReplicas) { cancel() }
	err := c.readReplicas(ctx, "/f", loc, 0, make([]byte, size))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled read = %v, want context.Canceled", err)
	}
}

// TestReadCanceledAfterShortAnswer: a replica answers short (so the others
// must be asked too) and the read is cancelled before they are; the region
// fails rather than reading as zeros past the short answer.
func TestReadCanceledAfterShortAnswer(t *testing.T) {
	const size = 1 << 20
	c, f, loc := newFakeClient(map[string]int{"a": 1000, "b": size, "c": size})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.onServe = func(*fakeReplicas) { cancel() }
	buf := make([]byte, 4096)
	if _, err := c.readInTurn(ctx, "/f", loc, loc.replicas, 0, buf); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled after a short answer: %v, want context.Canceled", err)
	}
}

// TestSmallReadOneReplica: a region under parallelReadMin goes to the
// first replica alone.
func TestSmallReadOneReplica(t *testing.T) {
	const size = 4 << 20
	c, f, loc := newFakeClient(map[string]int{"a": size, "b": size, "c": size})
	buf := make([]byte, parallelReadMin-1)
	if err := c.readReplicas(context.Background(), "/f", loc, 7, buf); err != nil {
		t.Fatal(err)
	}
	checkBytes(t, buf, 7, size)
	if f.served["a"] != 1 || f.served["b"]+f.served["c"] != 0 {
		t.Fatalf("pieces served: %v, want only a", f.served)
	}
}

// BenchmarkReadBusyReplica models the reader collisions of the GFS read
// benchmark: a 4 MiB region of a chunk whose nearest replica is shared with
// three other readers (a quarter of its rate: 40 ms/MiB against 10 ms/MiB
// for the others). one-replica reads the region from the nearest replica
// alone, as reads did before; pieces is readReplicas.
func BenchmarkReadBusyReplica(b *testing.B) {
	const size = 4 << 20
	c, f, loc := newFakeClient(map[string]int{"a": size, "b": size, "c": size})
	f.perMiB = map[string]time.Duration{"a": 40 * time.Millisecond, "b": 10 * time.Millisecond, "c": 10 * time.Millisecond}
	buf := make([]byte, size)
	b.Run("one-replica", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if _, err := c.readInTurn(context.Background(), "/f", loc, loc.replicas, 0, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pieces", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if err := c.readReplicas(context.Background(), "/f", loc, 0, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
