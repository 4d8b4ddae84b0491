package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestRepairRevokesLeaseOnLastReplica: a chunk whose secondaries die while
// its primary keeps the writer's lease extended is cloned in the round
// that finds it, not once the lease ends: the master revokes the lease
// (the primary moves to the next version with no lease) and clones that
// version from it. Meanwhile the writer gets no lease on the one replica.
func TestRepairRevokesLeaseOnLastReplica(t *testing.T) {
	for _, least := range []int{2, 1} {
		t.Run(fmt.Sprintf("min-replicas %d", least), func(t *testing.T) { testRepairRevokes(t, least) })
	}
}

// testRepairRevokes is TestRepairRevokesLeaseOnLastReplica with
// MinReplicas least: at 1 the one replica takes writes, and its lease is
// waited out (a writer would take a new one at once).
func testRepairRevokes(t *testing.T, least int) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(t, t.TempDir(), clk)
	cfg.MinReplicas = least
	cfg.RepairInterval = time.Hour // the test runs the rounds
	started := startedClones(&cfg)
	tm := startWith(t, cfg, clk)
	byAddr := map[string]*fakeCS{}
	for _, id := range []string{"a", "b", "c"} {
		cs := tm.startCS(id, "r-"+id)
		byAddr[cs.addr] = cs
	}
	tm.create(alice, "/f")
	resp, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/f"})
	if err != nil {
		t.Fatal(err)
	}
	h, v := chunkfs.Handle(resp.Chunk.Handle), chunkfs.Version(resp.Chunk.Version)
	primary := byAddr[resp.Chunk.Primary]
	d := tm.startCS("d", "r-d") // room for the clone
	// The primary and d keep beating, the primary extending its lease;
	// the secondaries fall silent until they are dead.
	for range 8 {
		clk.Advance(5 * time.Second)
		tm.beat(primary, uint64(h))
		tm.beat(d)
	}
	tm.m.checkLiveness()
	tm.m.repairOnce(false)

	got := started()
	if least == 1 {
		if len(got) != 0 || len(primary.leaseCalls()) != 1 {
			t.Errorf("min-replicas 1: clones %+v, primary told %+v; want the lease waited out", got, primary.leaseCalls())
		}
		return
	}
	if len(got) != 1 || got[0].Handle != h || got[0].Version != v+1 || got[0].Source != primary.addr || got[0].Target != d.addr || got[0].Live != 1 {
		t.Fatalf("clones started %+v; want one of chunk %d at v%d from the primary to d", got, h, v+1)
	}
	calls := primary.leaseCalls()
	if last := calls[len(calls)-1]; last.Version != uint64(v+1) || last.LeaseMs != 0 {
		t.Errorf("the primary was last told %+v; want v%d with no lease", last, v+1)
	}
	_, err = tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/f"})
	if kindOf(err) != chunkfs.KindUnavailable {
		t.Errorf("a write on the one replica under repair: %v, want unavailable", err)
	}
}

// TestRepairFencesLostPrimary: a chunk whose primary and one secondary
// fall silent under the writer's lease, leaving one secondary, is cloned
// in the round that finds it dead, not once the lease (a minute here)
// ends: the master moves the secondary left to the next version with no
// lease, which fences the lost primary off, and clones that version from
// it. Meanwhile the writer gets no lease on the one replica.
func TestRepairFencesLostPrimary(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(t, t.TempDir(), clk)
	cfg.LeaseDuration = time.Minute
	cfg.DeadAfter = 10 * time.Second
	cfg.RepairInterval = time.Hour // the test runs the rounds
	started := startedClones(&cfg)
	tm := startWith(t, cfg, clk)
	var all []*fakeCS
	for _, id := range []string{"a", "b", "c"} {
		all = append(all, tm.startCS(id, "r-"+id))
	}
	tm.create(alice, "/f")
	resp, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/f"})
	if err != nil {
		t.Fatal(err)
	}
	h, v := chunkfs.Handle(resp.Chunk.Handle), chunkfs.Version(resp.Chunk.Version)
	var left *fakeCS
	for _, cs := range all {
		if cs.addr != resp.Chunk.Primary {
			left = cs
			break
		}
	}
	d := tm.startCS("d", "r-d") // room for the clone
	for range 3 {
		clk.Advance(5 * time.Second)
		tm.beat(left)
		tm.beat(d)
	}
	tm.m.checkLiveness()
	tm.m.repairOnce(false)

	got := started()
	if len(got) != 1 || got[0].Handle != h || got[0].Version != v+1 || got[0].Source != left.addr || got[0].Target != d.addr || got[0].Live != 1 {
		t.Fatalf("clones started %+v; want one of chunk %d at v%d from the secondary left to d", got, h, v+1)
	}
	calls := left.leaseCalls()
	if last := calls[len(calls)-1]; last.Version != uint64(v+1) || last.LeaseMs != 0 {
		t.Errorf("the secondary left was last told %+v; want v%d with no lease", last, v+1)
	}
	_, err = tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/f"})
	if kindOf(err) != chunkfs.KindUnavailable {
		t.Errorf("a write on the one replica under repair: %v, want unavailable", err)
	}
}

// TestStalledCloneHoldsBackOneRound: a clone of a one-replica chunk that
// runs into its deadline (its target hangs) holds the two-replica chunk
// back while it runs; tried again, it holds it back in the round it
// starts in, and the next round clones the two-replica chunk alongside,
// instead of waiting a whole deadline per try.
func TestStalledCloneHoldsBackOneRound(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(t, t.TempDir(), clk)
	cfg.RPCTimeout = time.Second   // a clone's deadline: the chunks are empty
	cfg.RepairInterval = time.Hour // the test runs the rounds
	var mu sync.Mutex
	var events []CloneEvent
	cfg.OnClone = func(e CloneEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	seen := func() []CloneEvent {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(events)
	}
	tm := startWith(t, cfg, clk)
	var all []*fakeCS
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		cs := tm.startCS(id, "r-"+id)
		cs.hang = true
		all = append(all, cs)
	}
	handles := map[string]chunkfs.Handle{}
	replicas := map[string][]string{}
	for _, p := range []string{"/one", "/two"} {
		tm.create(alice, p)
		resp, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: p})
		if err != nil {
			t.Fatal(err)
		}
		handles[p], replicas[p] = chunkfs.Handle(resp.Chunk.Handle), resp.Chunk.Replicas
	}
	clk.Advance(cfg.LeaseDuration + 2*time.Second) // the writer's leases end
	for _, cs := range all {
		tm.beat(cs)
	}
	// /one is left with one good replica, /two with two.
	for p, bad := range map[string][]string{"/one": replicas["/one"][1:], "/two": replicas["/two"][2:]} {
		for _, addr := range bad {
			if _, err := tm.c.ReportCorrupt(bg, &pb.ReportCorruptRequest{Reporter: "test", Handle: uint64(handles[p]), Replica: addr}); err != nil {
				t.Fatal(err)
			}
		}
	}
	started := func(h chunkfs.Handle) int {
		n := 0
		for _, e := range seen() {
			if !e.Done && e.Handle == h {
				n++
			}
		}
		return n
	}
	tm.m.repairOnce(false)
	tm.m.repairOnce(false)
	if started(handles["/one"]) != 1 || started(handles["/two"]) != 0 {
		t.Fatalf("clones started while the first runs: %+v; want /one's alone", seen())
	}
	for !slices.ContainsFunc(seen(), func(e CloneEvent) bool { return e.Done }) {
		time.Sleep(10 * time.Millisecond) // the clone's deadline, in real time
	}
	if e := seen()[1]; !errors.Is(e.Err, errStalled) {
		t.Fatalf("the hung clone ended with %v; want it marked stalled", e.Err)
	}
	tm.m.repairOnce(false) // tried again: holds /two back this round
	if started(handles["/one"]) != 2 || started(handles["/two"]) != 0 {
		t.Fatalf("clones started in the round after the stall: %+v; want /one's again alone", seen())
	}
	tm.m.repairOnce(false)
	if started(handles["/two"]) != 1 {
		t.Fatalf("clones started in the next round: %+v; want /two's, alongside /one's retry", seen())
	}
}

// TestCloneAbortedAtItsDeadlineStalls: a target that aborts a clone at the
// deadline the call carried answers a moment before the master's own
// context ends; the clone ran into its deadline all the same, and is
// marked stalled (it was not, when only the master's context counted).
func TestCloneAbortedAtItsDeadlineStalls(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(t, t.TempDir(), clk)
	cfg.RPCTimeout = time.Second   // a clone's deadline: the chunk is empty
	cfg.RepairInterval = time.Hour // the test runs the round
	done := make(chan CloneEvent, 1)
	cfg.OnClone = func(e CloneEvent) {
		if e.Done {
			done <- e
		}
	}
	tm := startWith(t, cfg, clk)
	var all []*fakeCS
	for _, id := range []string{"a", "b", "c", "d"} {
		cs := tm.startCS(id, "r-"+id)
		cs.abort = 30 * time.Millisecond
		all = append(all, cs)
	}
	tm.create(alice, "/one")
	resp, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: alice, Path: "/one"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(cfg.LeaseDuration + 2*time.Second) // the writer's lease ends
	for _, cs := range all {
		tm.beat(cs)
	}
	for _, addr := range resp.Chunk.Replicas[1:] {
		if _, err := tm.c.ReportCorrupt(bg, &pb.ReportCorruptRequest{Reporter: "test", Handle: resp.Chunk.Handle, Replica: addr}); err != nil {
			t.Fatal(err)
		}
	}
	tm.m.repairOnce(false)
	if e := <-done; !errors.Is(e.Err, errStalled) {
		t.Fatalf("the clone aborted at its deadline ended with %v; want it marked stalled", e.Err)
	}
}

func TestRanOut(t *testing.T) {
	for _, c := range []struct {
		ctxErr      error
		left, limit time.Duration
		want        bool
	}{
		{context.DeadlineExceeded, 0, time.Second, true},
		{nil, 50 * time.Millisecond, time.Second, true},   // answered within a tenth of the timeout
		{nil, 300 * time.Millisecond, time.Second, false}, // a failure well before it
		{nil, 900 * time.Millisecond, time.Minute, true},  // the margin stops at a second
		{nil, 2 * time.Second, time.Minute, false},
		{context.Canceled, 0, time.Second, false}, // the master stopping
	} {
		if got := ranOut(c.ctxErr, c.left, c.limit); got != c.want {
			t.Errorf("ranOut(%v, %v left of %v) = %v, want %v", c.ctxErr, c.left, c.limit, got, c.want)
		}
	}
}

// startedClones has cfg's master record the clones it starts; the
// function returned reads them.
func startedClones(cfg *Config) func() []CloneEvent {
	var mu sync.Mutex
	var clones []CloneEvent
	cfg.OnClone = func(e CloneEvent) {
		mu.Lock()
		defer mu.Unlock()
		if !e.Done {
			clones = append(clones, e)
		}
	}
	return func() []CloneEvent {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(clones)
	}
}
