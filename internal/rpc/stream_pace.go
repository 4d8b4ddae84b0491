package rpc

import (
	"sync"
	"time"
)

// foregroundWindow is how long after a read (one not in the background)
// was served background reads are still paced: a client reading a chunk
// sends its next request within it.
const foregroundWindow = time.Second

// backgroundPacer decides the pace of a server's background reads (the
// reads of clones this server is the source of): none while no other read
// was served within foregroundWindow, so that clones run at what their
// targets' throttles allow; while one was, the background reads in
// progress share rate, and the clients' reads get the rest of the NIC. It
// reads no clock: callers pass the time.
type backgroundPacer struct {
	rate int64 // bytes a second; 0: background reads are never paced

	mu     sync.Mutex // guards last and active
	last   time.Time  // when another read was last served
	active int        // background reads in progress
}

// served notes that a read not in the background was served at now.
func (p *backgroundPacer) served(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.After(p.last) {
		p.last = now
	}
}

// begin counts a background read in progress until end is called.
func (p *backgroundPacer) begin() (end func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active++
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.active--
	}
}

// pace returns the bytes a second one background read in progress may be
// sent at, at now; 0: unpaced.
func (p *backgroundPacer) pace(now time.Time) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rate <= 0 || p.last.IsZero() || now.Sub(p.last) > foregroundWindow {
		return 0
	}
	return max(p.rate/int64(max(p.active, 1)), 1)
}
