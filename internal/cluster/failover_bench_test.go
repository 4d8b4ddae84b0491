package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/master"
)

// BenchmarkFailover measures, in an in-process group of three masters and
// three chunkservers, each op stopping the leader as a crash would:
// failover-s, from the stop to the first file written (create, data,
// close) through the new leader by a client that starts then; resume-s,
// until each of four writers that were writing all along has had a file
// acknowledged again; leader-s, until a master says it leads (elected,
// caught up, ready to take mutations). ns/op is the stop until both; the restart of the
// stopped master that follows each op is not timed.
//
//	go test -run '^$' -bench BenchmarkFailover -benchtime 5x ./internal/cluster/
func BenchmarkFailover(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Dir = b.TempDir()
	cfg.ChunkSize = 256 << 10
	cfg.Masters = 3
	cfg.Master = func(mc *master.Config) { mc.Placement.MinFree = 0 }
	c, err := Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		b.Fatal(err)
	}
	ccfg := client.DefaultConfig()
	ccfg.Master, ccfg.Caller = c.MasterAddr(), chunkfs.Root
	cl, err := client.New(ctx, ccfg)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()

	const writers = 4
	var (
		mu   sync.Mutex // guards last
		last [writers]time.Time
	)
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; wctx.Err() == nil; i++ {
				if writeFile(wctx, cl, fmt.Sprintf("/bench-w%d-%d", g, i), 64<<10) == nil {
					mu.Lock()
					last[g] = time.Now()
					mu.Unlock()
				}
			}
		}()
	}
	defer func() { stopWriters(); wg.Wait() }()
	resumedSince := func(t time.Time) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range last {
			if !l.After(t) {
				return false
			}
		}
		return true
	}

	var failover, resume, ready []time.Duration
	b.ResetTimer()
	for i := range b.N {
		old := c.Leader()
		stopped := time.Now()
		if err := c.StopGroupMaster(old); err != nil {
			b.Fatal(err)
		}
		readyAt := make(chan time.Duration, 1)
		go func() { // when a new leader is ready: caught up, old leases waited out
			for c.Leader() < 0 && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			readyAt <- time.Since(stopped)
		}()
		if err := writeFile(ctx, cl, fmt.Sprintf("/bench-first-%d", i), 64<<10); err != nil {
			b.Fatal(err)
		}
		failover = append(failover, time.Since(stopped))
		for !resumedSince(stopped) {
			select {
			case <-ctx.Done():
				b.Fatal("writers did not resume")
			case <-time.After(5 * time.Millisecond):
			}
		}
		resume = append(resume, time.Since(stopped))
		ready = append(ready, <-readyAt)
		b.StopTimer()
		if err := c.RestartGroupMaster(old); err != nil {
			b.Fatal(err)
		}
		if err := caughtUp(ctx, c, old, cl); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(median(failover).Seconds(), "failover-s")
	b.ReportMetric(median(resume).Seconds(), "resume-s")
	b.ReportMetric(median(ready).Seconds(), "leader-s")
	b.Logf("new leader ready %v; failover %v; writers resumed %v", ready, failover, resume)
}

func writeFile(ctx context.Context, cl *client.Client, path string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	f, err := cl.Create(ctx, path)
	if err != nil {
		return err
	}
	if _, err := f.Write(make([]byte, n)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// caughtUp waits until group master i has applied the client's state.
func caughtUp(ctx context.Context, c *Cluster, i int, cl *client.Client) error {
	for {
		st, err := cl.HAStatusOf(ctx, c.GroupMasterAddr(i))
		if err == nil && st.Applied >= uint64(cl.StateID()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("master %d did not catch up: %v", i, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
