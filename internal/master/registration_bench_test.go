package master

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// BenchmarkRestartRegistrations measures a restarted master taking the
// full reports of 23 servers at once, holding 155,000 single-chunk files
// of three replicas (a tenth of GFS Cluster B), while one goroutine
// applies commands back to back, timing each Apply (lock wait included):
// mkdirs, which leave the versions a registration read current, or
// creates, chunk commands that send each registration to its fallback;
// or none.
// It reports the wall time until every report is taken, the applies done
// meanwhile and their p99 and longest wait, for the registration path
// (register: versions read under the state lock, then the registry lock
// alone) and, in the same run as the reference, for registrations
// holding the state read lock throughout (registerHolding: the fallback,
// and how every registration went before).
func BenchmarkRestartRegistrations(b *testing.B) {
	const servers, files, repl = 23, 155_000, 3
	s := benchState(b, files)
	reports := reportsOf(s, servers, repl)
	ways := []struct {
		name     string
		register func(m *Master, rep fullReport) (registered, uint64, error)
	}{
		{"split", func(m *Master, rep fullReport) (registered, uint64, error) { return m.register(rep, "") }},
		{"holding", func(m *Master, rep fullReport) (registered, uint64, error) { return m.registerHolding(rep, "") }},
	}
	for _, load := range []struct {
		name string
		op   namespace.Op // 0: no applies
	}{{"alone", 0}, {"mkdir", namespace.OpMkdir}, {"create", namespace.OpCreate}} {
		b.Run(load.name, func(b *testing.B) {
			for range b.N {
				for _, way := range ways {
					took, lat := registerAll(b, s, reports, load.op, way.name, way.register)
					b.ReportMetric(float64(took)/1e6, way.name+"-ms")
					if lat != nil {
						b.ReportMetric(float64(len(lat)), way.name+"-applies")
						b.ReportMetric(pct(lat, 99), way.name+"-apply-p99-µs")
						b.ReportMetric(pct(lat, 100), way.name+"-apply-max-µs")
					}
				}
			}
		})
	}
}

// registerAll has a master on s with an empty registry take every report
// at once with register, while applies of op (none if 0) go on; it
// returns the time the reports took and the applies' latencies.
func registerAll(b *testing.B, s *state, reports []fullReport, op namespace.Op, tag string,
	register func(m *Master, rep fullReport) (registered, uint64, error)) (time.Duration, []time.Duration) {
	m := &Master{state: s, reg: newRegistry(1), cfg: Config{Clock: clock.NewFake(time.Unix(1000, 0))}}
	m.lead.ready.Store(true)
	var took time.Duration
	all := func() {
		start := time.Now()
		var wg sync.WaitGroup
		for _, rep := range reports {
			wg.Go(func() {
				if d, _, err := register(m, rep); err != nil || len(d.garbage)+len(d.stale) > 0 {
					b.Errorf("register: %v, %d garbage, %d stale", err, len(d.garbage), len(d.stale))
				}
			})
		}
		wg.Wait()
		took = time.Since(start)
	}
	if op == 0 {
		all()
		return took, nil
	}
	lat := applyLatenciesOf(s, op, tag, all)
	return took, lat
}

// reportsOf deals the replicas of every chunk in s, repl of each, to
// servers full reports.
func reportsOf(s *state, servers, repl int) []fullReport {
	out := make([]fullReport, servers)
	for i := range out {
		id := fmt.Sprintf("cs%03d", i)
		out[i].figures = figures{id: id, addr: id + ":7001", capacity: 1 << 40, free: 1 << 40}
	}
	c := 0
	s.read(func(ns *namespace.Namespace) {
		ns.EachChunk(func(h chunkfs.Handle, v chunkfs.Version, _ int) {
			for k := range repl {
				i := (repl*c + k) % servers
				out[i].chunks = append(out[i].chunks, replica{h, v})
			}
			c++
		})
	})
	return out
}
