package master

import (
	"fmt"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/placement"
)

// BenchmarkPlanAfterRegistration times registry.plan, which runs under
// Master.regMu, on a registry that every chunk's replicas have just
// registered into (every chunk dirty: the first round after safe mode),
// on the rounds after it (the dirty set emptied by the first), and on a
// full sweep, at 155,000 chunks on 23 servers (a tenth of GFS Cluster B).
func BenchmarkPlanAfterRegistration(b *testing.B) {
	const servers, chunks = 23, 155000
	lookup := func(chunkfs.Handle) (chunkfs.Version, int, int64, bool, bool) { return 1, 3, 1 << 20, false, true }
	now := time.Unix(1000, 0)
	cfg := placement.DefaultConfig()
	for _, tc := range []struct {
		name        string
		first, full bool
	}{{"first", true, false}, {"next", false, false}, {"full", false, true}} {
		b.Run(tc.name, func(b *testing.B) {
			r := newRegistry(1)
			buildRegistry(b, r, servers, chunks, 3)
			if !tc.first {
				r.plan(cfg, lookup, 2, now, false)
			}
			b.ResetTimer()
			for range b.N {
				if tc.first {
					b.StopTimer()
					for h := range r.chunks.all() {
						r.markDirty(h)
					}
					b.StartTimer()
				}
				r.plan(cfg, lookup, 2, now, tc.full)
			}
			b.ReportMetric(float64(r.chunks.dirtyLen()), "dirty-after")
		})
	}
}

// BenchmarkChoose10000 places one three-replica chunk among 10,000 live
// servers (each create's chunk 0 under the fleet run), as the registry
// does under its lock.
func BenchmarkChoose10000(b *testing.B) {
	r := newRegistry(1)
	for i := range 10000 {
		s := &server{id: fmt.Sprintf("fleet-%d", i), addr: fmt.Sprintf("10.0.%d.%d:7001", i/250, i%250), capacity: 1 << 40, free: 1 << 40,
			alive: true}
		r.servers[s.id], r.byAddr[s.addr] = s, s
	}
	now := time.Unix(1000, 0)
	cfg := placement.DefaultConfig()
	b.ResetTimer()
	for range b.N {
		if _, err := r.choose(cfg, 3, now, nil); err != nil {
			b.Fatal(err)
		}
	}
}
