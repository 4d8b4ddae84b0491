package cluster

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/master"
)

// TestNewServerFilledGradually: an empty server added to three half-full
// ones (each reporting an 8 MiB disk) is filled by the rebalancer once it
// is started, never with more than its bound of moves in flight, never
// leaving a chunk below its replication, while reads go on, until every
// server is within the threshold of the mean (allowing one chunk's worth
// for granularity).
func TestNewServerFilledGradually(t *testing.T) {
	const (
		capacity  = 8 << 20
		maxMoves  = 2
		threshold = 5.0
	)
	log := &cloneLog{}
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Chunkservers = 3
	cfg.ChunkSize = healChunk
	cfg.Replication = 2
	cfg.Capacity = capacity
	// No server dies here: on a loaded machine a heartbeat can be late
	// by more than the default second, and a server wrongly declared dead
	// would have its chunks repaired, which is not what this test is about.
	cfg.DeadAfter = 10 * time.Second
	cfg.Master = func(mc *master.Config) {
		mc.Placement.MinFree = 0
		mc.OnClone = log.add
		mc.Balance = false // started below, through the client
		mc.BalanceMaxMoves = maxMoves
	}
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cl, err := newDefaultClient(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })

	files := map[string][]byte{}
	for i := range 24 {
		p := fmt.Sprintf("/b%02d", i)
		files[p] = healBytes(uint64(400+i), healChunk)
		put(t, ctx, cl, p, files[p])
	}
	fresh, err := c.AddChunkserver()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAlive(ctx, 4); err != nil {
		t.Fatal(err)
	}
	freshAddr := c.ChunkserverAddr(fresh)
	stopCount := watch(func() error {
		sets, err := replicaSets(ctx, cl, files)
		if err != nil {
			return err
		}
		for h, rs := range sets {
			if len(rs) < 2 {
				return fmt.Errorf("chunk %d down to replicas %v during the moves", h, rs)
			}
		}
		return nil
	})

	// Reads go on during the moves, from a client that cached the
	// locations before them: a replica moved away answers "no such
	// chunk", and the client looks the chunk up again.
	if err := readsAll(ctx, cl, files); err != nil {
		t.Fatal(err)
	}
	stopReads := watch(func() error { return readsAll(ctx, cl, files) })

	// Stopped, the balancer moves nothing.
	time.Sleep(500 * time.Millisecond)
	if n := len(log.all()); n != 0 {
		t.Fatalf("%d clone events with the balancer stopped", n)
	}
	st, err := cl.Balance(ctx, "start", threshold)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Running || st.Threshold != threshold || st.Spread < 40 {
		t.Fatalf("balance start answered %+v", st)
	}
	rep := waitBalanced(t, ctx, cl, threshold+100*float64(healChunk)/capacity)
	if err := stopCount(); err != nil {
		t.Error(err)
	}
	if err := stopReads(); err != nil {
		t.Errorf("a read failed during the moves: %v", err)
	}
	if st, err = cl.Balance(ctx, "stop", 0); err != nil || st.Running {
		t.Errorf("balance stop answered %+v, %v", st, err)
	}

	inFlight, peak, moved, toFresh := 0, 0, 0, 0
	for _, e := range log.all() {
		switch {
		case !e.Move:
			t.Errorf("a repair clone %+v in a healthy cluster", e)
		case !e.Done:
			inFlight++
			peak = max(peak, inFlight)
		default:
			inFlight--
			if e.Err == nil && e.Trimmed {
				moved++
			}
			if e.Target == freshAddr {
				toFresh++
			}
		}
	}
	if peak > maxMoves {
		t.Errorf("%d moves in flight at once; the bound is %d", peak, maxMoves)
	}
	if moved == 0 || toFresh == 0 {
		t.Errorf("%d moves, %d to the new server", moved, toFresh)
	}
	r := waitHealed(t, ctx, cl)
	if r.Chunks != 24 {
		t.Errorf("fsck saw %d chunks, want 24", r.Chunks)
	}
	if err := readsAll(ctx, cl, files); err != nil {
		t.Error(err)
	}
	// Every location the master lists is a replica on that server's disk:
	// none it trimmed was counted again from a report built before the
	// server deleted it.
	if err := listedHeld(ctx, c, cl, files); err != nil {
		t.Error(err)
	}
	for _, s := range rep.Servers {
		t.Logf("%s: %d chunks, %.1f %% used", s.Addr, s.Chunks, 100*float64(s.Used)/float64(s.Capacity))
	}
	t.Logf("%d replicas moved (%d to the new server), at most %d in flight", moved, toFresh, peak)
}

// listedHeld checks that every replica the master lists for the chunks of
// files is on the listed chunkserver's disk.
func listedHeld(ctx context.Context, c *Cluster, cl *client.Client, files map[string][]byte) error {
	sets, err := replicaSets(ctx, cl, files)
	if err != nil {
		return err
	}
	for h, rs := range sets {
		for _, addr := range rs {
			if i := serverIndex(c, addr); i < 0 || !c.HasReplica(i, chunkfs.Handle(h)) {
				return fmt.Errorf("chunk %d is listed on %s, which does not hold it", h, addr)
			}
		}
	}
	return nil
}

// waitBalanced waits until every live server's utilisation is within
// slack percentage points of the mean and no move is in flight.
func waitBalanced(t *testing.T, ctx context.Context, cl *client.Client, slack float64) *client.Report {
	t.Helper()
	for {
		rep, err := cl.ClusterReport(ctx)
		if err == nil && rep.Balance != nil && rep.Balance.MovesInFlight == 0 && within(rep, slack) {
			return rep
		}
		if ctx.Err() != nil {
			t.Fatalf("never balanced: %+v, %v", rep, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func within(rep *client.Report, slack float64) bool {
	var used, capacity int64
	for _, s := range rep.Servers {
		used, capacity = used+s.Used, capacity+s.Capacity
	}
	mean := 100 * float64(used) / float64(capacity)
	for _, s := range rep.Servers {
		if math.Abs(100*float64(s.Used)/float64(s.Capacity)-mean) > slack {
			return false
		}
	}
	return true
}
