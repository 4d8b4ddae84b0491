package master

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/placement"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// chunksOf lists the handles of every chunk the master's namespace holds.
func (tm *testMaster) chunksOf() []chunkfs.Handle {
	var out []chunkfs.Handle
	tm.m.state.read(func(ns *namespace.Namespace) {
		ns.EachChunk(func(h chunkfs.Handle, _ chunkfs.Version, _ int) { out = append(out, h) })
	})
	slices.Sort(out)
	return out
}

// heartbeatBehindRegistry holds the registry lock and sends req, returning
// once the heartbeat is inside (it holds beatMu), waiting for the lock.
// release lets the lock go and returns the heartbeat's answer; the test's
// end lets it go if release was not called.
func (tm *testMaster) heartbeatBehindRegistry(req *pb.HeartbeatRequest) (release func() (*pb.HeartbeatResponse, error)) {
	tm.t.Helper()
	tm.m.regMu.Lock()
	locked := true
	tm.t.Cleanup(func() {
		if locked {
			tm.m.regMu.Unlock()
		}
	})
	done := make(chan struct{})
	var resp *pb.HeartbeatResponse
	var err error
	go func() {
		defer close(done)
		resp, err = tm.c.Heartbeat(bg, req)
	}()
	for tm.m.beatMu.TryLock() {
		select {
		case <-done:
			tm.t.Fatal("the heartbeat returned while the registry lock was held")
		default:
		}
		tm.m.beatMu.Unlock()
		time.Sleep(time.Millisecond)
	}
	return func() (*pb.HeartbeatResponse, error) {
		select {
		case <-done:
			tm.t.Fatal("the heartbeat returned while the registry lock was held")
		default:
		}
		tm.m.regMu.Unlock()
		locked = false
		<-done
		return resp, err
	}
}

// A heartbeat waiting for the registry lock holds no state lock: an
// apply (and so every read queued behind it) goes on meanwhile. Before,
// the heartbeat took the read lock first and kept it while it waited.
func TestHeartbeatWaitingForRegistryLetsAppliesGo(t *testing.T) {
	tm := startMaster(t, "", nil)
	f := tm.startCS("cs1", "")
	release := tm.heartbeatBehindRegistry(&pb.HeartbeatRequest{Id: f.id, Addr: f.addr, Capacity: 1 << 40, Free: 1 << 39})
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	if _, _, aerr := tm.m.apply(ctx, &namespace.Command{Op: namespace.OpMkdir, Caller: chunkfs.Caller{}, Path: "/d", Mode: 0o755}); aerr != nil {
		t.Fatalf("mkdir while a heartbeat waits for the registry: %v", aerr)
	}
	resp, err := release()
	if err != nil || resp.Reregister {
		t.Fatalf("heartbeat: %v, reregister %v", err, resp.GetReregister())
	}
}

// A heartbeat whose chunk versions were read before a chunk command was
// applied decides on the namespace as it is when it takes the registry
// lock: a sampled replica of a chunk deleted meanwhile is garbage, not
// counted as it would have been at the versions read.
func TestHeartbeatVersionsReadBeforeAnApplyAreNotUsed(t *testing.T) {
	tm := startMaster(t, "", nil)
	tm.create(root, "/f")
	// No chunkserver yet: chunk 0 is logged, on no server.
	if _, _, err := tm.m.apply(bg, &namespace.Command{Op: namespace.OpAllocChunk, Path: "/f", Index: 0}); err != nil {
		t.Fatal(err)
	}
	hs := tm.chunksOf()
	if len(hs) != 1 {
		t.Fatalf("chunks %v, want one", hs)
	}
	h := hs[0]
	f := tm.startCS("cs1", "")
	release := tm.heartbeatBehindRegistry(&pb.HeartbeatRequest{Id: f.id, Addr: f.addr, Capacity: 1 << 40, Free: 1 << 39,
		Sample: []*pb.ChunkReplica{{Handle: uint64(h), Version: 1}}})
	// The apply takes the write lock: the heartbeat has read the versions
	// (chunk h at version 1, its replica not counted: to be counted) by
	// then, and waits for the registry.
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	if _, _, aerr := tm.m.apply(ctx, &namespace.Command{Op: namespace.OpDelete, Caller: chunkfs.Caller{}, Path: "/f"}); aerr != nil {
		t.Fatal(aerr)
	}
	resp, err := release()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(resp.Garbage, uint64(h)) {
		t.Fatalf("garbage %v: the replica of deleted chunk %d is not deleted", resp.Garbage, h)
	}
	tm.m.regMu.Lock()
	placed := tm.m.reg.placed(h)
	tm.m.regMu.Unlock()
	if placed {
		t.Fatalf("the registry counts a replica of deleted chunk %d", h)
	}
}

// plan lets its caller release the locks after every planSlice chunks,
// and decides its clones on the state after the last slice: a chunk short
// of replicas in an early slice that was healed meanwhile is not cloned.
func TestPlanPausesBetweenSlices(t *testing.T) {
	r := registryOf(4)
	now := time.Unix(3000, 0)
	servers := r.sorted()
	const n = 3*planSlice + 10
	for h := chunkfs.Handle(1); h <= n; h++ {
		for _, s := range servers[:3] {
			r.addReplica(s, h, 1)
		}
	}
	lookup := func(h chunkfs.Handle) (chunkfs.Version, int, int64, bool, bool) {
		return 1, 3, 1 << 20, false, h >= 1 && h <= n
	}
	r.plan(placement.DefaultConfig(), lookup, 2, now, false) // every chunk healthy: none dirty
	// Chunk 1..n lose a replica: every one is short.
	for h := chunkfs.Handle(1); h <= n; h++ {
		r.dropReplica(servers[0], h, now)
	}
	pauses := 0
	var healed []chunkfs.Handle
	pause := func() chunkLookup {
		pauses++
		if pauses == 1 {
			// Meanwhile every chunk gets its replica back.
			for h := chunkfs.Handle(1); h <= n; h++ {
				r.addReplica(servers[0], h, 1)
				healed = append(healed, h)
			}
		}
		return lookup
	}
	clones, _ := r.planIn(placement.DefaultConfig(), lookup, 2, now, false, pause)
	if pauses != n/planSlice {
		t.Errorf("paused %d times over %d chunks, want %d", pauses, n, n/planSlice)
	}
	if len(clones) != 0 {
		t.Fatalf("cloned %d chunks healed before the clones were decided", len(clones))
	}
	// Without the change the round clones them.
	for _, h := range healed {
		r.dropReplica(servers[0], h, now)
	}
	if clones, _ := r.planIn(placement.DefaultConfig(), lookup, 2, now, false, func() chunkLookup { return lookup }); len(clones) == 0 {
		t.Fatal("no clone of chunks short of a replica")
	}
}

// A heartbeat that finds maxBeatsWaiting waiting skips its sample.
func TestHeartbeatsBeyondTheQueueSkipTheirSample(t *testing.T) {
	tm := startMaster(t, "", nil)
	f := tm.startCS("cs1", "")
	unknown := []*pb.ChunkReplica{{Handle: 1 << 40, Version: 1}} // no such chunk: garbage when sampled
	tm.m.beatMu.Lock()
	locked := true
	defer func() {
		if locked {
			tm.m.beatMu.Unlock()
		}
	}()
	errs := make(chan error, maxBeatsWaiting)
	for range maxBeatsWaiting {
		go func() {
			_, err := tm.c.Heartbeat(bg, &pb.HeartbeatRequest{Id: f.id, Addr: f.addr, Capacity: 1 << 40, Free: 1 << 39})
			errs <- err
		}()
	}
	for deadline := time.Now().Add(time.Minute); tm.m.beatsWaiting.Load() < maxBeatsWaiting; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d heartbeats waiting, want %d", tm.m.beatsWaiting.Load(), maxBeatsWaiting)
		}
	}
	type answer struct {
		resp *pb.HeartbeatResponse
		err  error
	}
	last := make(chan answer, 1)
	go func() {
		resp, err := tm.c.Heartbeat(bg, &pb.HeartbeatRequest{Id: f.id, Addr: f.addr, Capacity: 1 << 40, Free: 1 << 39, Sample: unknown})
		last <- answer{resp, err}
	}()
	for deadline := time.Now().Add(time.Minute); tm.m.beatsWaiting.Load() <= maxBeatsWaiting; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the last heartbeat never came")
		}
	}
	tm.m.beatMu.Unlock()
	locked = false
	a := <-last
	if a.err != nil || len(a.resp.Garbage) != 0 || a.resp.Reregister {
		t.Fatalf("a heartbeat beyond the queue: %v, garbage %v; want its sample skipped", a.err, a.resp.GetGarbage())
	}
	for range maxBeatsWaiting {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if resp := tm.beatWith(f, unknown); !slices.Contains(resp.Garbage, uint64(1<<40)) {
		t.Fatalf("garbage %v: a heartbeat with no queue did not check its sample", resp.Garbage)
	}
}
