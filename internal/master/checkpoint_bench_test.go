package master

import (
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/namespace"
)

// BenchmarkApplyDuringCheckpoint measures the stall a checkpoint puts on
// applies: the state holds N single-chunk files; one goroutine applies
// creates back to back, timing each Apply (lock wait included), alone,
// then while another goroutine writes a checkpoint the way the log does
// (state.Freeze, then the write outside the lock), then while one is
// written under the read lock throughout (state.Snapshot: the old way,
// the reference). It reports p99 and max apply latency of each phase, in
// the same run.
func BenchmarkApplyDuringCheckpoint(b *testing.B) {
	for _, files := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			s := benchState(b, files)
			for range b.N {
				alone := applyLatencies(s, "alone", nil)
				var frozenTime, lockedTime time.Duration
				frozen := applyLatencies(s, "frozen", func() {
					start := time.Now()
					write, _, err := s.Freeze()
					if err == nil {
						err = write(io.Discard)
					}
					if err != nil {
						b.Error(err)
					}
					frozenTime = time.Since(start)
				})
				locked := applyLatencies(s, "locked", func() {
					start := time.Now()
					if err := s.Snapshot(io.Discard); err != nil {
						b.Error(err)
					}
					lockedTime = time.Since(start)
				})
				b.ReportMetric(float64(frozenTime)/1e6, "checkpoint-ms")
				b.ReportMetric(float64(lockedTime)/1e6, "locked-checkpoint-ms")
				b.ReportMetric(pct(alone, 99), "p99-alone-µs")
				b.ReportMetric(pct(frozen, 99), "p99-during-µs")
				b.ReportMetric(pct(alone, 100), "max-alone-µs")
				b.ReportMetric(pct(frozen, 100), "max-during-µs")
				b.ReportMetric(pct(locked, 100), "max-during-locked-µs")
			}
		})
	}
}

// benchState builds a state of files single-chunk files in directories
// of 1000.
func benchState(b *testing.B, files int) *state {
	s := newState(time.Hour)
	index := uint64(0)
	apply := func(c *namespace.Command) {
		index++
		if r := s.Apply(index, c.Encode(nil)); r.(namespace.Result).Err != nil {
			b.Fatal(r.(namespace.Result).Err)
		}
	}
	apply(&namespace.Command{Op: namespace.OpInit, ChunkSize: 1 << 20, Replication: 3})
	for i := range files {
		if i%1000 == 0 {
			apply(&namespace.Command{Op: namespace.OpMkdir, Path: fmt.Sprintf("/d%04d", i/1000), Mode: 0o755})
		}
		p := fmt.Sprintf("/d%04d/f%07d", i/1000, i)
		apply(&namespace.Command{Op: namespace.OpCreate, Path: p, Mode: 0o644})
		apply(&namespace.Command{Op: namespace.OpAllocChunk, Path: p})
	}
	return s
}

// applyLatencies applies creates for as long as during runs (or 20,000
// when it is nil) and returns each Apply's latency.
func applyLatencies(s *state, tag string, during func()) []time.Duration {
	return applyLatenciesOf(s, namespace.OpCreate, tag, during)
}

// applyLatenciesOf is applyLatencies applying op (a create or a mkdir).
func applyLatenciesOf(s *state, op namespace.Op, tag string, during func()) []time.Duration {
	finished := make(chan struct{})
	if during != nil {
		go func() {
			during()
			close(finished)
		}()
	}
	var lat []time.Duration
	index := s.stateID()
	for i := 0; ; i++ {
		if during == nil && i == 20_000 {
			break
		}
		if during != nil && i%64 == 0 {
			select {
			case <-finished:
				return lat
			default:
			}
		}
		index++
		cmd := (&namespace.Command{Op: op, Path: fmt.Sprintf("/bench-%s-%d-%d", tag, index, i), Mode: 0o755}).Encode(nil)
		start := time.Now()
		s.Apply(index, cmd)
		lat = append(lat, time.Since(start))
	}
	return lat
}

// pct returns the p-th percentile of lat in microseconds.
func pct(lat []time.Duration, p int) float64 {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	i := min(len(lat)*p/100, len(lat)-1)
	return float64(lat[i]) / 1e3
}
