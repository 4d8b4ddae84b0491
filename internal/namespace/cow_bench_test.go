package namespace

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// threadCPU returns the CPU time of the calling OS thread: the work done,
// whatever else the machine runs.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// buildTree makes /tree with files single-chunk files, 1000 a directory.
func buildTree(tb testing.TB, files int) *Namespace {
	ns := New()
	ns.Apply(&Command{Op: OpInit, ChunkSize: testChunk, Replication: 3})
	ns.Apply(&Command{Op: OpMkdir, Path: "/tree", Mode: 0o755})
	for i := range files {
		if i%1000 == 0 {
			ns.Apply(&Command{Op: OpMkdir, Path: fmt.Sprintf("/tree/d%04d", i/1000), Mode: 0o755})
		}
		p := fmt.Sprintf("/tree/d%04d/file%06d", i/1000, i)
		for _, c := range []Command{{Op: OpCreate, Path: p, Mode: 0o644}, {Op: OpAllocChunk, Path: p}} {
			if r := ns.Apply(&c); r.Err != nil {
				tb.Fatal(r.Err)
			}
		}
	}
	return ns
}

// BenchmarkSnapshotApply measures how long applying the snapshot of a
// 100,000-file tree holds the namespace (every other mutation waits that
// long): wall time, and the CPU time of the applying thread (the time on
// an idle core), beside a create applied to the same namespace as the
// reference.
func BenchmarkSnapshotApply(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ns := buildTree(b, 100_000)
	var snap, snapCPU, create time.Duration
	b.ResetTimer()
	for i := range b.N {
		start, cpu := time.Now(), threadCPU()
		if r := ns.Apply(&Command{Op: OpSnapshot, Path: "/tree", Target: fmt.Sprintf("/snap%d", i)}); r.Err != nil {
			b.Fatal(r.Err)
		}
		snap += time.Since(start)
		snapCPU += threadCPU() - cpu
		start = time.Now()
		if r := ns.Apply(&Command{Op: OpCreate, Path: fmt.Sprintf("/other%d", i), Mode: 0o644}); r.Err != nil {
			b.Fatal(r.Err)
		}
		create += time.Since(start)
		b.StopTimer()
		ns.Apply(&Command{Op: OpDelete, Path: fmt.Sprintf("/snap%d", i), Flags: FlagRecursive}) // keep the tree one copy deep
		b.StartTimer()
	}
	b.ReportMetric(float64(snap.Microseconds())/1000/float64(b.N), "snapshot-ms")
	b.ReportMetric(float64(snapCPU.Microseconds())/1000/float64(b.N), "snapshot-cpu-ms")
	b.ReportMetric(float64(create.Nanoseconds())/1000/float64(b.N), "create-µs")
}
