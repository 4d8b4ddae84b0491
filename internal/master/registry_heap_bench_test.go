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
// as a master holds them once in service: every chunk at version 1
// (written once), or one in eight at 2 and one in eight at 3, or versions
// 1 to 3 in turn (no version holds most of a page).
func BenchmarkRegistryHeap(b *testing.B) {
	const servers, chunks, repl = 23, 155_000, 3
	for _, tc := range []struct {
		name string
		v    func(chunkfs.Handle) chunkfs.Version
	}{
		{"one", func(chunkfs.Handle) chunkfs.Version { return 1 }},
		{"quarter-odd", func(h chunkfs.Handle) chunkfs.Version { return chunkfs.Version(1 + max(0, int(h%8)-5)) }},
		{"mixed", func(h chunkfs.Handle) chunkfs.Version { return chunkfs.Version(1 + h%3) }},
	} {
		b.Run("versions="+tc.name, func(b *testing.B) {
			lookup := func(h chunkfs.Handle) (chunkfs.Version, int, int64, bool, bool) {
				return tc.v(h), repl, 1 << 20, false, true
			}
			var perChunk float64
			for range b.N {
				got := heapOfRegistry(func(r *registry) {
					buildRegistryVersions(b, r, servers, chunks, repl, tc.v)
					r.plan(placement.DefaultConfig(), lookup, 2, time.Unix(1000, 0), false)
				})
				perChunk = float64(got) / chunks
			}
			b.ReportMetric(perChunk, "B/chunk")
		})
	}
}

// BenchmarkRegisterAll times the full reports of 23 servers holding
// 155,000 chunks of three replicas into an empty registry (a master's
// restart), under the lock each registration holds.
func BenchmarkRegisterAll(b *testing.B) {
	for range b.N {
		buildRegistry(b, newRegistry(1), 23, 155_000, 3)
	}
}
