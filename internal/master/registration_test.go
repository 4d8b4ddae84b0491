package master

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// oneChunk logs file p with chunk 0, on no server, and returns its handle.
func (tm *testMaster) oneChunk(p string) chunkfs.Handle {
	tm.t.Helper()
	tm.create(root, p)
	if _, _, err := tm.m.apply(bg, &namespace.Command{Op: namespace.OpAllocChunk, Path: p, Index: 0}); err != nil {
		tm.t.Fatal(err)
	}
	hs := tm.chunksOf()
	if len(hs) != 1 {
		tm.t.Fatalf("chunks %v, want one", hs)
	}
	return hs[0]
}

// clusterID returns the cluster ID the master logged.
func (tm *testMaster) clusterID() string {
	var id string
	tm.m.state.read(func(ns *namespace.Namespace) { id = ns.ClusterID() })
	return id
}

// reportOf is a full report from server id at addr of one replica.
func reportOf(id, addr string, h chunkfs.Handle, v chunkfs.Version) fullReport {
	return fullReport{
		figures: figures{id: id, addr: addr, capacity: 1 << 40, free: 1 << 39},
		chunks:  []replica{{handle: h, version: v}},
	}
}

// A registration whose chunk versions were read before a chunk command
// was applied decides on the namespace as it is when it takes the
// registry lock: a replica of a chunk deleted meanwhile is garbage, and
// one whose chunk was given a new version meanwhile is stale, not counted
// as they would have been at the versions read.
func TestRegistrationVersionsReadBeforeAnApplyAreNotUsed(t *testing.T) {
	tm := startMaster(t, "", nil)
	gone, bumped := tm.oneChunk("/gone"), chunkfs.Handle(0)
	tm.create(root, "/bumped")
	if _, _, err := tm.m.apply(bg, &namespace.Command{Op: namespace.OpAllocChunk, Path: "/bumped", Index: 0}); err != nil {
		t.Fatal(err)
	}
	for _, h := range tm.chunksOf() {
		if h != gone {
			bumped = h
		}
	}
	cluster := tm.clusterID()

	vs, id := tm.m.state.versionsFor([]chunkfs.Handle{gone})
	if _, _, err := tm.m.apply(bg, &namespace.Command{Op: namespace.OpDelete, Caller: chunkfs.Caller{}, Path: "/gone"}); err != nil {
		t.Fatal(err)
	}
	d, _, err := tm.m.registerAt(reportOf("cs1", "127.0.0.1:1", gone, 1), cluster, vs, id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(d.garbage, gone) {
		t.Errorf("garbage %v: the replica of chunk %d, deleted after the versions were read, is not deleted", d.garbage, gone)
	}

	vs, id = tm.m.state.versionsFor([]chunkfs.Handle{bumped})
	if _, _, err := tm.m.apply(bg, &namespace.Command{Op: namespace.OpSetVersion, Handle: bumped, Version: 2}); err != nil {
		t.Fatal(err)
	}
	d, _, err = tm.m.registerAt(reportOf("cs2", "127.0.0.1:2", bumped, 1), cluster, vs, id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(d.stale, bumped) {
		t.Errorf("stale %v: the replica of chunk %d at version 1, logged at 2 after the versions were read, is not stale", d.stale, bumped)
	}
	tm.m.regMu.Lock()
	defer tm.m.regMu.Unlock()
	for _, h := range []chunkfs.Handle{gone, bumped} {
		if tm.m.reg.placed(h) {
			t.Errorf("the registry counts a replica of chunk %d at a version read before an apply", h)
		}
	}
}

// Versions read with no chunk command applied since are used as they
// are: the registration counts the replica under the registry lock alone.
func TestRegistrationUsesCurrentVersions(t *testing.T) {
	tm := startMaster(t, "", nil)
	h := tm.oneChunk("/f")
	vs, id := tm.m.state.versionsFor([]chunkfs.Handle{h})
	if _, _, err := tm.m.apply(bg, &namespace.Command{Op: namespace.OpMkdir, Caller: chunkfs.Caller{}, Path: "/d", Mode: 0o755}); err != nil {
		t.Fatal(err) // not a chunk command: the versions stand
	}
	if !tm.m.state.current(vs) {
		t.Fatal("a mkdir made the chunk versions read before it stale")
	}
	d, _, err := tm.m.registerAt(reportOf("cs1", "127.0.0.1:1", h, 1), tm.clusterID(), vs, id)
	if err != nil || len(d.garbage)+len(d.stale)+len(d.ahead) != 0 {
		t.Fatalf("register: %v, garbage %v, stale %v, ahead %v", err, d.garbage, d.stale, d.ahead)
	}
	tm.m.regMu.Lock()
	defer tm.m.regMu.Unlock()
	if !tm.m.reg.placed(h) {
		t.Fatalf("the registry does not count the replica of chunk %d", h)
	}
}

// A registration of another cluster's ID, as the versions were read, is
// refused and changes nothing.
func TestRegistrationOfAnotherClusterChangesNothing(t *testing.T) {
	tm := startMaster(t, "", nil)
	h := tm.oneChunk("/f")
	vs, id := tm.m.state.versionsFor([]chunkfs.Handle{h})
	_, _, err := tm.m.registerAt(reportOf("cs1", "127.0.0.1:1", h, 1), "another-cluster", vs, id)
	if chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("register for another cluster: %v, want KindUnavailable", err)
	}
	tm.m.regMu.Lock()
	defer tm.m.regMu.Unlock()
	if tm.m.reg.placed(h) || tm.m.reg.servers["cs1"] != nil {
		t.Fatal("a refused registration was recorded")
	}
}

// A registration waiting for the registry lock holds no state lock: an
// apply (and so every read queued behind it) goes on meanwhile. Before,
// the registration took the read lock first and kept it while it waited.
func TestRegistrationWaitingForRegistryLetsAppliesGo(t *testing.T) {
	tm := startMaster(t, "", nil)
	h := tm.oneChunk("/f")
	tm.m.regMu.Lock()
	locked := true
	defer func() {
		if locked {
			tm.m.regMu.Unlock()
		}
	}()
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		_, err = tm.c.Register(bg, &pb.RegisterRequest{Id: "cs1", Addr: "127.0.0.1:1", Capacity: 1 << 40, Free: 1 << 39,
			Chunks: []*pb.ChunkReplica{{Handle: uint64(h), Version: 1}}})
	}()
	for tm.m.reportMu.TryLock() { // until the registration is inside
		select {
		case <-done:
			t.Fatalf("the registration returned while the registry lock was held: %v", err)
		default:
		}
		tm.m.reportMu.Unlock()
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	if _, _, aerr := tm.m.apply(ctx, &namespace.Command{Op: namespace.OpMkdir, Caller: chunkfs.Caller{}, Path: "/d", Mode: 0o755}); aerr != nil {
		t.Fatalf("mkdir while a registration waits for the registry: %v", aerr)
	}
	tm.m.regMu.Unlock()
	locked = false
	<-done
	if err != nil {
		t.Fatal(err)
	}
	tm.m.regMu.Lock()
	defer tm.m.regMu.Unlock()
	if !tm.m.reg.placed(h) {
		t.Fatalf("the registry does not count the registered replica of chunk %d", h)
	}
}
