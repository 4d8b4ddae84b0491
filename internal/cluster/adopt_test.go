package cluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/master"
)

// appendRig is a group of three masters and three chunkservers whose
// chunkservers record every mutation they applied as primary and had
// acknowledged, with appenders writing small records to existing files,
// so that a failover finds leases out on chunks the new leader did not
// grant.
type appendRig struct {
	c     *Cluster
	cl    *client.Client
	lease time.Duration

	mu    sync.Mutex // guards muts and acked
	muts  map[chunkfs.Handle][]primaryMutation
	acked [][]time.Time // per appender: when each of its records was acknowledged
}

// primaryMutation is one acknowledged mutation and the primary that
// applied it.
type primaryMutation struct {
	primary int
	chunkserver.Mutation
}

// startAppendRig starts the group with leases of lease, adoption on or
// off, and appenders appenders on files of their own, which go on until
// ctx ends.
func startAppendRig(tb testing.TB, ctx context.Context, lease time.Duration, adopt bool, appenders int) *appendRig {
	tb.Helper()
	r := &appendRig{lease: lease, muts: map[chunkfs.Handle][]primaryMutation{}, acked: make([][]time.Time, appenders)}
	cfg := DefaultConfig()
	cfg.Dir = tb.TempDir()
	cfg.ChunkSize = 64 << 20 // the appenders stay in their first chunk
	cfg.Masters = 3
	cfg.Lease = lease
	cfg.Master = func(mc *master.Config) { mc.Placement.MinFree, mc.NoLeaseAdoption = 0, !adopt }
	cfg.Chunkserver = func(i int, sc *chunkserver.Config) {
		sc.OnMutation = func(m chunkserver.Mutation) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.muts[m.Handle] = append(r.muts[m.Handle], primaryMutation{i, m})
		}
	}
	c, err := Start(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	if _, err := c.WaitLeader(ctx); err != nil {
		tb.Fatal(err)
	}
	r.c = c
	if r.cl, err = newDefaultClient(ctx, c); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.cl.Close() })
	var wg sync.WaitGroup
	for g := range appenders {
		f := r.openAppend(tb, ctx, fmt.Sprintf("/append-%d", g))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer f.Close()
			r.appendUntil(ctx, f, g)
		}()
	}
	tb.Cleanup(wg.Wait)
	r.waitAcked(tb, ctx, time.Now()) // every appender's chunk exists and has a lease
	return r
}

func (r *appendRig) openAppend(tb testing.TB, ctx context.Context, p string) *client.File {
	tb.Helper()
	f, err := r.cl.Create(ctx, p)
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		f, err = r.cl.OpenFile(ctx, p, os.O_WRONLY, 0)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// appendUntil appends a record every 10 ms until ctx ends; failed appends
// are retried by the next.
func (r *appendRig) appendUntil(ctx context.Context, f *client.File, g int) {
	rec := make([]byte, 512)
	for ctx.Err() == nil {
		if _, err := f.Append(rec); err == nil {
			r.mu.Lock()
			r.acked[g] = append(r.acked[g], time.Now())
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitAcked waits until every appender has had a record acknowledged
// after t.
func (r *appendRig) waitAcked(tb testing.TB, ctx context.Context, t time.Time) {
	tb.Helper()
	for !r.ackedSince(t) {
		select {
		case <-ctx.Done():
			tb.Fatal("appenders did not go on")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (r *appendRig) ackedSince(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.acked {
		if len(a) == 0 || !a[len(a)-1].After(t) {
			return false
		}
	}
	return true
}

// stall returns the longest time any appender went without an
// acknowledgement between from and to (counting from its last one before
// from).
func (r *appendRig) stall(from, to time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var worst time.Duration
	for _, a := range r.acked {
		prev := time.Time{}
		for _, at := range a {
			if !prev.IsZero() && at.After(from) && !prev.After(to) {
				worst = max(worst, at.Sub(prev))
			}
			prev = at
		}
	}
	return worst
}

// failover stops the leader and watches the appenders for as long as the
// old leases could hold them up (the logged horizon is at most a lease and
// a half and slack ahead), until each has had a record acknowledged after
// that; then it restarts the old leader and waits until it has caught up.
// It returns when the stop was and the end of the watch.
func (r *appendRig) failover(tb testing.TB, ctx context.Context) (stopped, watched time.Time) {
	tb.Helper()
	old := r.c.Leader()
	stopped = time.Now()
	if err := r.c.StopGroupMaster(old); err != nil {
		tb.Fatal(err)
	}
	watched = stopped.Add(r.lease*8/5 + 2*time.Second)
	select {
	case <-ctx.Done():
		tb.Fatal(ctx.Err())
	case <-time.After(time.Until(watched)):
	}
	r.waitAcked(tb, ctx, watched)
	if err := r.c.RestartGroupMaster(old); err != nil {
		tb.Fatal(err)
	}
	if err := caughtUp(ctx, r.c, old, r.cl); err != nil {
		tb.Fatal(err)
	}
	return stopped, watched
}

// overlaps checks the chunkservers' own records: for every chunk, the
// time from the first to the last acknowledged mutation of each primary
// at each version must not overlap that of another primary.
func (r *appendRig) overlaps() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	type tenure struct {
		primary    int
		version    chunkfs.Version
		start, end time.Time
		n          int
	}
	var bad []string
	for h, muts := range r.muts {
		var ts []tenure
		for _, m := range muts {
			i := slices.IndexFunc(ts, func(t tenure) bool { return t.primary == m.primary && t.version == m.Version })
			if i < 0 {
				ts = append(ts, tenure{primary: m.primary, version: m.Version, start: m.Start, end: m.End})
				i = len(ts) - 1
			}
			t := &ts[i]
			t.start, t.end, t.n = minTime(t.start, m.Start), maxTime(t.end, m.End), t.n+1
		}
		for i, a := range ts {
			for _, b := range ts[i+1:] {
				if a.primary != b.primary && a.start.Before(b.end) && b.start.Before(a.end) {
					bad = append(bad, fmt.Sprintf("chunk %d: primary %d at v%d (%d mutations %s–%s) overlaps primary %d at v%d (%d mutations %s–%s)",
						h, a.primary, a.version, a.n, a.start.Format("15:04:05.000"), a.end.Format("15:04:05.000"),
						b.primary, b.version, b.n, b.start.Format("15:04:05.000"), b.end.Format("15:04:05.000")))
				}
			}
		}
	}
	return bad
}

// primaries counts the distinct (primary, version) pairs that acknowledged
// mutations, over all chunks.
func (r *appendRig) primaries() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	type key struct {
		h chunkfs.Handle
		p int
		v chunkfs.Version
	}
	seen := map[key]bool{}
	for h, muts := range r.muts {
		for _, m := range muts {
			seen[key{h, m.primary, m.Version}] = true
		}
	}
	return len(seen)
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TestLeaseSafetyAcrossFailovers: appenders write to existing chunks, and
// a writer creates new files (new chunks, new leases), while the leader is
// stopped three times; the new leaders adopt the leases their predecessors
// granted, and the chunkservers' own records show no two primaries of one
// chunk acknowledging mutations in overlapping time.
func TestLeaseSafetyAcrossFailovers(t *testing.T) {
	if testing.Short() {
		t.Skip("three failovers take about half a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	actx, stopAppenders := context.WithCancel(ctx)
	defer stopAppenders()
	r := startAppendRig(t, actx, 5*time.Second, true, 4)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; actx.Err() == nil; i++ {
			writeFile(actx, r.cl, fmt.Sprintf("/new-%d", i), 64<<10)
		}
	}()
	defer wg.Wait()
	for i := range 3 {
		stopped, watched := r.failover(t, ctx)
		t.Logf("failover %d: longest stall of an appender %v", i, r.stall(stopped, watched).Round(time.Millisecond))
	}
	stopAppenders()
	t.Logf("%d (chunk, primary, version) tenures recorded", r.primaries())
	for _, msg := range r.overlaps() {
		t.Error(msg)
	}
}

// BenchmarkFailoverHeldLeases measures how long appenders writing to
// existing chunks stall when the leader is stopped, with 10 s leases, with
// the new leader adopting the leases chunkservers report (adopt) and
// waiting every old lease out as GFS does (wait). stall-s is the median
// over the ops of the longest gap between two acknowledgements of any of
// four appenders across the failover. Each op watches the appenders for
// 18 s (the longest an old lease can hold them up, and 2 s).
//
//	go test -run '^$' -bench BenchmarkFailoverHeldLeases -benchtime 5x ./internal/cluster/
func BenchmarkFailoverHeldLeases(b *testing.B) {
	for _, adopt := range []bool{true, false} {
		name := map[bool]string{true: "adopt", false: "wait"}[adopt]
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			actx, stopAppenders := context.WithCancel(ctx)
			defer stopAppenders()
			r := startAppendRig(b, actx, 10*time.Second, adopt, 4)
			var stalls []time.Duration
			b.ResetTimer()
			for range b.N {
				stopped, watched := r.failover(b, ctx)
				stalls = append(stalls, r.stall(stopped, watched))
			}
			b.StopTimer()
			stopAppenders()
			b.ReportMetric(median(stalls).Seconds(), "stall-s")
			b.Logf("%s: stalls %v", name, stalls)
			if bad := r.overlaps(); len(bad) > 0 {
				b.Fatal(bad)
			}
		})
	}
}
