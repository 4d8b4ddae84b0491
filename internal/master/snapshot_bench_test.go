package master

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// buildSnapTree logs /tree with files single-chunk files, 1000 a directory,
// a directory per log entry.
func buildSnapTree(b *testing.B, tm *testMaster, files int) {
	for d := 0; d*1000 < files; d++ {
		dir := fmt.Sprintf("/tree/d%04d", d)
		cmds := []*namespace.Command{{Op: namespace.OpMkdir, Path: dir, Mode: 0o755, Flags: namespace.FlagParents}}
		for i := d * 1000; i < min(files, (d+1)*1000); i++ {
			p := fmt.Sprintf("%s/file%06d", dir, i)
			cmds = append(cmds, &namespace.Command{Op: namespace.OpCreate, Path: p, Mode: 0o644},
				&namespace.Command{Op: namespace.OpAllocChunk, Path: p})
		}
		res, _, err := tm.m.applyAll(bg, cmds)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
}

// BenchmarkSnapshotStall measures what a snapshot of a 100,000-file tree
// does to unrelated mutations: the longest latency of mkdirs issued
// back to back over gRPC while the snapshot runs, beside the longest in
// a window as long with no snapshot, in the same run (stall-ms and
// base-ms), and the snapshot call's own time.
func BenchmarkSnapshotStall(b *testing.B) {
	tm := startMaster(b, "", nil)
	buildSnapTree(b, tm, 100_000)
	if _, err := tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: "/other", Mode: 0o777}); err != nil {
		b.Fatal(err)
	}
	c := benchClients(b, tm.addr, 1)[0]
	next := 0
	// mkdirs issues mkdirs until done is closed and returns their latencies.
	mkdirs := func(done chan struct{}, out *[]time.Duration, wg *sync.WaitGroup) {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			next++
			start := time.Now()
			if _, err := c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: fmt.Sprintf("/other/%d", next), Mode: 0o755}); err != nil {
				b.Error(err)
				return
			}
			*out = append(*out, time.Since(start))
		}
	}
	var stall, base, snap time.Duration
	b.ResetTimer()
	for i := range b.N {
		var during, without []time.Duration
		var wg sync.WaitGroup
		done := make(chan struct{})
		wg.Add(1)
		go mkdirs(done, &during, &wg)
		time.Sleep(20 * time.Millisecond) // the mkdirs are flowing
		start := time.Now()
		if _, err := tm.c.MakeSnapshot(bg, &pb.SnapshotRequest{Caller: root, Src: "/tree", Dst: fmt.Sprintf("/snap%d", i)}); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		time.Sleep(20 * time.Millisecond)
		close(done)
		wg.Wait()
		done = make(chan struct{})
		wg.Add(1)
		go mkdirs(done, &without, &wg)
		time.Sleep(took + 40*time.Millisecond)
		close(done)
		wg.Wait()
		stall += slices.Max(during)
		base += slices.Max(without)
		snap += took
		b.StopTimer()
		if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: root, Path: fmt.Sprintf("/snap%d", i), Recursive: true}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(stall.Microseconds())/1000/n, "stall-ms")
	b.ReportMetric(float64(base.Microseconds())/1000/n, "base-ms")
	b.ReportMetric(float64(snap.Microseconds())/1000/n, "snapshot-ms")
}
