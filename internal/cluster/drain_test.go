package cluster

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/master"
)

// drainFiles writes n two-chunk files and returns their contents by path.
func drainFiles(t *testing.T, ctx context.Context, cl *client.Client, n int) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for i := range n {
		p := fmt.Sprintf("/d%02d", i)
		files[p] = healBytes(uint64(300+i), 2*healChunk-500)
		put(t, ctx, cl, p, files[p])
	}
	return files
}

// replicaSets returns every chunk's replica addresses, by handle.
func replicaSets(ctx context.Context, cl *client.Client, files map[string][]byte) (map[uint64][]string, error) {
	out := map[uint64][]string{}
	for p := range files {
		chunks, err := cl.Chunks(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, ch := range chunks {
			out[ch.Handle] = ch.Replicas
		}
	}
	return out, nil
}

// watch runs check every 20 ms until stop is called, which returns the
// first error check gave.
func watch(check func() error) (stop func() error) {
	var first error
	var mu sync.Mutex // guards first
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if err := check(); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() error {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return first
	}
}

// readsAll checks that every file reads back whole.
func readsAll(ctx context.Context, cl *client.Client, files map[string][]byte) error {
	for p, want := range files {
		got, err := get(ctx, cl, p)
		if err != nil {
			return fmt.Errorf("%s: %v", p, err)
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s: %d bytes, not the ones written", p, len(got))
		}
	}
	return nil
}

// waitDrain waits until admin decommission shows server addr in state.
func waitDrain(t *testing.T, ctx context.Context, cl *client.Client, addr, state string) client.DecommissionState {
	t.Helper()
	for {
		states, err := cl.Decommission(ctx, "", false)
		for _, s := range states {
			if s.Addr == addr && s.State == state {
				return s
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never %s: %+v, %v", addr, state, states, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDecommissionDrains: a server being decommissioned gets its chunks
// cloned elsewhere while reads go on; no chunk has fewer than 3 replicas
// at any moment; the intent survives a master restart; the server ends
// decommissioned with every chunk on 3 other servers, and removing it then
// costs no chunk a replica.
func TestDecommissionDrains(t *testing.T) {
	c, cl, _, ctx := startHeal(t, 4, func(mc *master.Config) { mc.MaxClonesPerServer = 1 })
	files := drainFiles(t, ctx, cl, 10)
	victim := c.ChunkserverAddr(1)

	var reads atomic.Int64
	var restarts atomic.Int64 // odd while the master restarts: reads may fail then
	stopReads := watch(func() error {
		reads.Add(1)
		before := restarts.Load()
		if err := readsAll(ctx, cl, files); err != nil && before%2 == 0 && restarts.Load() == before {
			return err
		}
		return nil
	})
	stopCount := watch(func() error {
		before := restarts.Load()
		sets, err := replicaSets(ctx, cl, files)
		if err != nil || before%2 == 1 || restarts.Load() != before {
			return nil // the restarted master is still learning locations
		}
		for h, rs := range sets {
			if len(rs) < 3 {
				return fmt.Errorf("chunk %d down to replicas %v during the drain", h, rs)
			}
		}
		return nil
	})

	states, err := cl.Decommission(ctx, victim, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 1 || states[0].Addr != victim || states[0].State != "decommissioning" || states[0].Remaining == 0 {
		t.Fatalf("decommission answered %+v", states)
	}
	held := states[0].Chunks
	// A new chunk goes elsewhere.
	put(t, ctx, cl, "/new", healBytes(999, 1000))
	if chunks, err := cl.Chunks(ctx, "/new"); err != nil || slices.Contains(chunks[0].Replicas, victim) {
		t.Errorf("a new chunk was placed on the server being decommissioned: %+v, %v", chunks, err)
	}

	restarts.Add(1)
	if err := c.RestartMaster(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAlive(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for _, err := cl.ClusterReport(ctx); err != nil; _, err = cl.ClusterReport(ctx) {
		time.Sleep(20 * time.Millisecond) // the client reconnects
	}
	restarts.Add(1)
	// The restarted master knows the intent from its log.
	waitDrain(t, ctx, cl, victim, "decommissioning")
	done := waitDrain(t, ctx, cl, victim, "decommissioned")
	if err := stopCount(); err != nil {
		t.Error(err)
	}
	if err := stopReads(); err != nil {
		t.Errorf("a read failed during the drain: %v", err)
	}
	files["/new"] = healBytes(999, 1000) // the watchers read the map until now
	if done.Remaining != 0 || done.Chunks < held {
		t.Errorf("decommissioned with %+v; it held %d chunks", done, held)
	}
	sets, err := replicaSets(ctx, cl, files)
	if err != nil {
		t.Fatal(err)
	}
	for h, rs := range sets {
		others := slices.DeleteFunc(slices.Clone(rs), func(a string) bool { return a == victim })
		if len(others) < 3 {
			t.Errorf("chunk %d decommissioned with %v: fewer than 3 elsewhere", h, rs)
		}
	}
	rep, err := cl.ClusterReport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Servers {
		if s.Addr == victim && s.State != "decommissioned" {
			t.Errorf("report shows %s as %q", victim, s.State)
		}
	}
	// Safe to remove: with it gone, no chunk is under-replicated and every
	// file reads back.
	repaired := rep.Repaired
	if err := c.StopChunkserver(1); err != nil {
		t.Fatal(err)
	}
	for {
		rep, err := cl.ClusterReport(ctx)
		if err == nil && !rep.Servers[slices.IndexFunc(rep.Servers, func(s client.ServerStatus) bool { return s.Addr == victim })].Alive {
			if rep.UnderReplicated != 0 || rep.Missing != 0 || rep.Repaired != repaired {
				t.Errorf("after removing the decommissioned server: %d under-replicated, %d missing, %d clones", rep.UnderReplicated, rep.Missing, rep.Repaired-repaired)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the stopped server was never declared dead")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := readsAll(ctx, cl, files); err != nil {
		t.Error(err)
	}
	t.Logf("%d chunks drained from %s; %d rounds of reads of every file during the drain", held, victim, reads.Load())
}

// TestRecommissionTrimsKeepingRackSpread: a recommissioned server's
// replicas count again, and the excess each chunk then has is trimmed to 3
// on 3 racks (servers are on racks i%3: rack0 holds two of the four).
func TestRecommissionTrimsKeepingRackSpread(t *testing.T) {
	c, cl, _, ctx := startHeal(t, 4, nil)
	files := drainFiles(t, ctx, cl, 6)
	victim := c.ChunkserverAddr(1)
	rack := map[string]int{}
	for i := range 4 {
		rack[c.ChunkserverAddr(i)] = i % 3
	}
	if _, err := cl.Decommission(ctx, "", true); err == nil {
		t.Error("recommission of no server accepted")
	}
	if _, err := cl.Decommission(ctx, victim, false); err != nil {
		t.Fatal(err)
	}
	waitDrain(t, ctx, cl, victim, "decommissioned")
	states, err := cl.Decommission(ctx, victim, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 1 || states[0].State != "live" {
		t.Errorf("recommission answered %+v", states)
	}
	for {
		sets, err := replicaSets(ctx, cl, files)
		if err != nil {
			t.Fatal(err)
		}
		over := 0
		for h, rs := range sets {
			if len(rs) < 3 {
				t.Fatalf("chunk %d fell to %v while trimming", h, rs)
			}
			if len(rs) > 3 {
				over++
				continue
			}
			racks := map[int]bool{}
			for _, a := range rs {
				racks[rack[a]] = true
			}
			if len(racks) != 3 {
				t.Errorf("chunk %d trimmed to %v: %d racks", h, rs, len(racks))
			}
		}
		if over == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d chunks still over-replicated", over)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := readsAll(ctx, cl, files); err != nil {
		t.Error(err)
	}
}

// TestDecommissionSurvivesFailover: the intent is in the log, so after the
// leader of three masters is killed the new leader goes on draining the
// server and places no new chunk on it.
func TestDecommissionSurvivesFailover(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ChunkSize = healChunk
	cfg.Chunkservers = 4
	cfg.Masters = 3
	c, cl, ctx := startWith(t, cfg)
	files := drainFiles(t, ctx, cl, 4)
	victim := c.ChunkserverAddr(3)
	if _, err := cl.Decommission(ctx, victim, false); err != nil {
		t.Fatal(err)
	}
	old := c.Leader()
	if err := c.StopGroupMaster(old); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	waitDrain(t, ctx, cl, victim, "decommissioned")
	for i := range 4 {
		p := fmt.Sprintf("/after-%d", i)
		files[p] = healBytes(uint64(500+i), 1000)
		put(t, ctx, cl, p, files[p])
		if chunks, err := cl.Chunks(ctx, p); err != nil || slices.Contains(chunks[0].Replicas, victim) {
			t.Errorf("%s placed on the server being decommissioned: %+v, %v", p, chunks, err)
		}
	}
	if err := readsAll(ctx, cl, files); err != nil {
		t.Error(err)
	}
}
