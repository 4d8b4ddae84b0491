package master

import (
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/placement"
)

// BenchmarkRegistryHeap measures the registry's heap per chunk (B/chunk)
// with a tenth of GFS Cluster B's chunks (155,000, three replicas each)
// reported by 23 servers, after one repair round has looked at them all,
// as a master holds them once in service.
func BenchmarkRegistryHeap(b *testing.B) {
	const servers, chunks, repl = 23, 155_000, 3
	lookup := func(chunkfs.Handle) (chunkfs.Version, int, int64, bool, bool) { return 1, repl, 1 << 20, false, true }
	var perChunk float64
	for range b.N {
		got := heapOfRegistry(func(r *registry) {
			buildRegistry(b, r, servers, chunks, repl)
			r.plan(placement.DefaultConfig(), lookup, 2, time.Unix(1000, 0), false)
		})
		perChunk = float64(got) / chunks
	}
	b.ReportMetric(perChunk, "B/chunk")
}

// BenchmarkRegisterAll times the full reports of 23 servers holding
// 155,000 chunks of three replicas into an empty registry (a master's
// restart), under the lock each registration holds.
func BenchmarkRegisterAll(b *testing.B) {
	for range b.N {
		buildRegistry(b, newRegistry(1), 23, 155_000, 3)
	}
}
