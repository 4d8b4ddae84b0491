package master

import (
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/placement"
)

// TestChunkInfoSize pins the chunk record at 12 bytes: the master holds
// one a chunk, millions of them.
func TestChunkInfoSize(t *testing.T) {
	if n := unsafe.Sizeof(chunkInfo{}); n != 12 {
		t.Errorf("chunkInfo is %d bytes, want 12", n)
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

// TestDirtyMarksFollowPlan registers 40,000 chunks (all dirty), plans
// them healthy, and checks the dirty marks and their counts by page
// through marking, cleaning and removing records: the planner walks
// exactly the dirty records, in handle order.
func TestDirtyMarksFollowPlan(t *testing.T) {
	const chunks = 40_000
	r := newRegistry(1)
	buildRegistry(t, r, 6, chunks, 3)
	if n := r.chunks.dirtyLen(); n != chunks {
		t.Fatalf("%d chunks dirty after registration, want %d", n, chunks)
	}
	lookup := func(chunkfs.Handle) (chunkfs.Version, int, int64, bool, bool) { return 1, 3, 1 << 20, false, true }
	r.plan(placement.DefaultConfig(), lookup, 2, time.Unix(1000, 0), false)
	if n := r.chunks.dirtyLen(); n != 0 {
		t.Fatalf("%d chunks dirty after a plan found them healthy", n)
	}
	var want []chunkfs.Handle
	i := 0
	for h := range r.chunks.all() {
		if i%997 == 0 {
			want = append(want, h)
		}
		i++
	}
	for _, h := range slices.Backward(want) {
		r.markDirty(h)
		r.markDirty(h) // twice counts once
	}
	r.markDirty(1 << 40) // no record: nothing to mark
	gone := want[len(want)/2]
	r.chunks.remove(gone)
	want = slices.DeleteFunc(want, func(h chunkfs.Handle) bool { return h == gone })
	var got []chunkfs.Handle
	for h, ci := range r.chunks.dirtyOnes() {
		if !ci.isDirty() {
			t.Errorf("chunk %d walked as dirty, not marked", h)
		}
		got = append(got, h)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dirty walk gives %d chunks %v..., want %d %v...", len(got), got[:min(3, len(got))], len(want), want[:3])
	}
	if n := r.chunks.dirtyLen(); n != len(want) {
		t.Fatalf("dirty count %d, want %d", n, len(want))
	}
	r.plan(placement.DefaultConfig(), lookup, 2, time.Unix(1000, 0), false)
	if n := r.chunks.dirtyLen(); n != 0 {
		t.Fatalf("%d chunks dirty after a second plan", n)
	}
	for key, p := range r.chunks.pages {
		if p.dirty != 0 {
			t.Fatalf("page %d counts %d dirty after the plan", key, p.dirty)
		}
	}
}

// TestEndedLeasesLeaveNoRecord grants leases on chunks, lets some end
// and plans: the ended ones leave nothing beside the records (a chunk
// keeps no lease record once its lease cannot be held), the others stay
// valid, and a fence set under a lease stays with the chunk.
func TestEndedLeasesLeaveNoRecord(t *testing.T) {
	r := newRegistry(1)
	buildRegistry(t, r, 3, 100, 3)
	now := time.Unix(1000, 0)
	for h := chunkfs.Handle(1); h <= 100; h++ {
		primary, _ := r.lease(h, now)
		if primary != nil {
			t.Fatalf("chunk %d leased before any grant", h)
		}
		r.beginCalls(h, 2)
		r.recordLease(h, r.replicas(h, 1)[0], now.Add(time.Duration(h)*time.Second), now)
		r.endCalls(h)
	}
	r.dropReplica(r.replicas(90, 1)[1], 90, now) // under its lease: fenced
	lookup := func(chunkfs.Handle) (chunkfs.Version, int, int64, bool, bool) { return 1, 3, 1 << 20, false, true }
	later := now.Add(60 * time.Second)
	r.plan(placement.DefaultConfig(), lookup, 2, later, false)
	if len(r.leases) != 40 || len(r.busy) != 0 {
		t.Fatalf("%d lease records and %d busy after 60 of 100 ended, want 40 and 0", len(r.leases), len(r.busy))
	}
	for h := chunkfs.Handle(1); h <= 100; h++ {
		if got, want := r.leaseOutstanding(h, later), h > 60; got != want {
			t.Errorf("chunk %d: lease outstanding %v, want %v", h, got, want)
		}
	}
	if ci := r.chunks.get(90); ci == nil || !ci.fence() {
		t.Errorf("chunk 90 lost its fence")
	}
}

// TestLeasesPrunedWithoutPlan grants a lease a second on 5,000 chunks,
// each for 10 s, with no plan run (a master in safe mode plans none):
// the records of ended leases go as grants come, so no more than
// minLeasePrune are kept, and the ten that may still be held stay.
func TestLeasesPrunedWithoutPlan(t *testing.T) {
	const chunks = 5000
	r := newRegistry(1)
	buildRegistry(t, r, 1, chunks, 1)
	s := r.servers["cs000"]
	now := time.Unix(1000, 0)
	for h := chunkfs.Handle(1); h <= chunks; h++ {
		now = now.Add(time.Second)
		r.recordLease(h, s, now.Add(10*time.Second), now)
		if len(r.leases) > minLeasePrune {
			t.Fatalf("%d lease records kept after %d grants", len(r.leases), h)
		}
	}
	for h := chunkfs.Handle(chunks - 20); h <= chunks; h++ {
		if got, want := r.leaseOutstanding(h, now), h > chunks-10; got != want {
			t.Errorf("chunk %d: lease outstanding %v, want %v", h, got, want)
		}
	}
}

// TestEndedLeasesGiveBackTheirRoom grants leases on 100,000 chunks, then
// lets them all end and prunes: the heap the records took is given back
// (a Go map keeps the room of its most entries), not kept for good after
// a burst of writes.
func TestEndedLeasesGiveBackTheirRoom(t *testing.T) {
	const chunks = 100_000
	r := newRegistry(1)
	buildRegistry(t, r, 1, chunks, 1)
	s := r.servers["cs000"]
	now := time.Unix(1000, 0)
	heap := func() int64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := heap()
	for h := chunkfs.Handle(1); h <= chunks; h++ {
		r.recordLease(h, s, now.Add(10*time.Second), now)
	}
	r.pruneLeases(now)
	with := heap()
	r.pruneLeases(now.Add(time.Minute))
	after := heap()
	t.Logf("100,000 lease records: %d B, %d B once ended and pruned", with-before, after-before)
	if len(r.leases) != 0 || with-before < chunks*16 {
		t.Fatalf("%d records after all ended; the records took %d B, want at least %d", len(r.leases), with-before, chunks*16)
	}
	if kept := after - before; kept > (with-before)/10 {
		t.Errorf("the ended leases' records keep %d of the %d B they took", kept, with-before)
	}
}

// TestReportedReplicasFit registers full reports and checks that each
// server's replica pages hold no spare room (append left up to as much
// again).
func TestReportedReplicasFit(t *testing.T) {
	r := newRegistry(1)
	buildRegistry(t, r, 3, 100_000, 3)
	for _, s := range r.servers {
		for _, p := range s.chunks.pages {
			if cap(p.lows) != len(p.lows) || cap(p.vers) != len(p.vers) {
				t.Fatalf("%s: page %d holds %d replicas in room for %d and %d", s.id, p.key, len(p.lows), cap(p.lows), cap(p.vers))
			}
		}
	}
}

// TestReplacedServerSlotGivenAgain registers a, b and c, then d at a's
// address (a is forgotten and its slot given back; d takes it), then e:
// every chunk's holders are those that reported it, none taken for
// another through a slot.
func TestReplacedServerSlotGivenAgain(t *testing.T) {
	r := newRegistry(1)
	version := func(chunkfs.Handle) (chunkfs.Version, bool) { return 1, true }
	now := time.Unix(1000, 0)
	register := func(id, addr string, handles ...chunkfs.Handle) {
		var rep []replica
		for _, h := range handles {
			rep = append(rep, replica{h, 1})
		}
		fig := figures{id: id, addr: addr, capacity: 1 << 40, free: 1 << 40}
		if _, err := r.register(fullReport{figures: fig, chunks: rep}, version, now); err != nil {
			t.Fatal(err)
		}
	}
	register("a", "a:1", 1, 2)
	register("b", "b:1", 1, 2, 3)
	register("c", "c:1", 2, 3)
	slotA := r.servers["a"].slot
	register("d", "a:1", 3)
	register("e", "e:1", 1)
	if r.servers["a"] != nil || r.servers["d"].slot != slotA || len(r.slots) != 4 {
		t.Fatalf("d has slot %d, a's was %d, of %d (a still known: %v)", r.servers["d"].slot, slotA, len(r.slots), r.servers["a"] != nil)
	}
	want := map[chunkfs.Handle][]string{1: {"b", "e"}, 2: {"b", "c"}, 3: {"b", "c", "d"}}
	for h, ids := range want {
		var got []string
		for _, s := range r.replicas(h, 1) {
			got = append(got, s.id)
		}
		slices.Sort(got)
		if !slices.Equal(got, ids) {
			t.Errorf("chunk %d held by %v, want %v", h, got, ids)
		}
	}
}
