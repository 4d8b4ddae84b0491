package master

import (
	"sync"

	"github.com/chunkfs/chunkfs"
)

// traffic sums the chunk data chunkservers report having served on their
// data streams and received by pushes: Table 3's read and write rates on a
// master whose chunkservers run in other processes. Each server reports
// its totals since it started, at registration and in every heartbeat;
// the first report this master has from a server is its baseline, and a
// total smaller than the last one (the server restarted) counts whole.
// The sums are since this master started, every replica counted.
type traffic struct {
	mu            sync.Mutex             // guards the fields below
	last          map[string]trafficPair // by chunkserver ID: its last report
	read, written int64
}

type trafficPair struct{ read, written int64 }

// checkTraffic refuses counters no chunkserver sends.
func checkTraffic(op, id string, read, written int64) error {
	if read < 0 || written < 0 {
		return chunkfs.E(op, id, chunkfs.KindInvalid, "negative traffic counters")
	}
	return nil
}

// note takes server id's report of its totals.
func (t *traffic) note(id string, read, written int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = make(map[string]trafficPair)
	}
	prev, ok := t.last[id]
	t.last[id] = trafficPair{read, written}
	if ok {
		t.read += grown(prev.read, read)
		t.written += grown(prev.written, written)
	}
}

// grown is what a counter that was prev and now is now has counted since.
func grown(prev, now int64) int64 {
	if now < prev {
		return now // reset: the server restarted
	}
	return now - prev
}

// totals returns the sums.
func (t *traffic) totals() (read, written int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.read, t.written
}

// Traffic returns the chunk data this master's chunkservers report having
// served and received since it started (Figures.ReadBytes and
// WrittenBytes), without computing the other figures.
func (m *Master) Traffic() (read, written int64) { return m.traffic.totals() }
