package master

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs/internal/rpc"
)

// RPC queue time (HDFS's RpcQueueTime): how long each call waits from the
// arrival of its headers to the master's guards, before its handler runs.
// The master keeps a histogram over its lifetime, logs a summary when it
// closes and, when Config.QueueStatsFile is set, writes it there as JSON
// (QueueStats) for benchmarks.

// QueueStats summarises the queue times of the calls a master served.
type QueueStats struct {
	Calls  int64   `json:"calls"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
}

// queueBuckets per power of two of microseconds: a percentile is exact to
// within 2^(1/8), 9 %.
const (
	queueSub     = 8
	queueBuckets = 32 * queueSub // up to 2^32 µs
)

// queueHist is a log-scale histogram of queue times.
type queueHist struct {
	mu     sync.Mutex // guards counts, n and sumUS
	counts [queueBuckets]int64
	n      int64
	sumUS  float64
}

// bucketOf is the bucket of a wait of us microseconds: 0 for under 1 µs.
func bucketOf(us float64) int {
	if us < 1 {
		return 0
	}
	return min(int(math.Log2(us)*queueSub)+1, queueBuckets-1)
}

// bucketTop is the upper bound of bucket b, in microseconds.
func bucketTop(b int) float64 { return math.Exp2(float64(b) / queueSub) }

func (h *queueHist) add(d time.Duration) {
	us := float64(d) / 1e3
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[bucketOf(us)]++
	h.n++
	h.sumUS += us
}

// stats returns the summary of what was added.
func (h *queueHist) stats() QueueStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := QueueStats{Calls: h.n}
	if h.n == 0 {
		return st
	}
	st.MeanMS = h.sumUS / float64(h.n) / 1e3
	st.P50MS, st.P90MS, st.P99MS = h.quantileLocked(0.5), h.quantileLocked(0.9), h.quantileLocked(0.99)
	return st
}

// quantileLocked is the upper bound, in ms, of the bucket holding the q
// quantile.
func (h *queueHist) quantileLocked(q float64) float64 {
	rank := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for b, c := range h.counts {
		if seen += c; seen >= rank {
			return bucketTop(b) / 1e3
		}
	}
	return bucketTop(queueBuckets-1) / 1e3
}

// queueGuard records each call's queue time; it never refuses a call.
func (m *Master) queueGuard(ctx context.Context, _ string, _ any) error {
	if t, ok := rpc.Arrival(ctx); ok {
		m.queue.add(time.Since(t))
	}
	return nil
}

// reportQueue logs the queue-time summary and writes it to
// Config.QueueStatsFile when set.
func (m *Master) reportQueue() error {
	st := m.queue.stats()
	m.cfg.Logger.Info("rpc queue time", "calls", st.Calls, "mean_ms", st.MeanMS, "p50_ms", st.P50MS, "p90_ms", st.P90MS, "p99_ms", st.P99MS)
	if m.cfg.QueueStatsFile == "" {
		return nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return os.WriteFile(m.cfg.QueueStatsFile, append(b, '\n'), 0o644)
}
