package rpc

import (
	"net"
	"sync"
	"time"
)

// foregroundWindow is how long after a read (one not in the background)
// was served background reads are still paced: a client reading a chunk
// sends its next request within it.
const foregroundWindow = time.Second

// backgroundPacer paces a server's background reads (the reads of clones
// this server is the source of): not at all while no other read was served
// within foregroundWindow, so that clones run at what their targets'
// throttles allow; while one was, the background reads in progress share
// rate, and the clients' reads get the rest of the NIC. A client's read
// paces those in progress as it starts, not at their next piece. It reads
// no clock: callers pass the time.
type backgroundPacer struct {
	rate int64                 // bytes a second; 0: background reads are never paced
	set  func(net.Conn, int64) // sets a connection's pace (setPacing; 0: none)

	mu    sync.Mutex         // guards last and conns
	last  time.Time          // when another read was last served
	conns map[net.Conn]int64 // the connections of background reads in progress, and the pace set on each
}

func newBackgroundPacer(rate int64, set func(net.Conn, int64)) *backgroundPacer {
	return &backgroundPacer{rate: rate, set: set, conns: make(map[net.Conn]int64)}
}

// served notes that a read not in the background was served at now, and
// paces the background reads in progress at once.
func (p *backgroundPacer) served(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.After(p.last) {
		p.last = now
	}
	for conn := range p.conns {
		p.paceLocked(conn, now)
	}
}

// begin counts a background read on conn in progress until end is called,
// which lifts its pace.
func (p *backgroundPacer) begin(conn net.Conn) (end func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[conn] = 0
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.conns[conn] != 0 {
			p.set(conn, 0)
		}
		delete(p.conns, conn)
	}
}

// pace sets the pace of the background read on conn for its next piece.
func (p *backgroundPacer) pace(conn net.Conn, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paceLocked(conn, now)
}

func (p *backgroundPacer) paceLocked(conn net.Conn, now time.Time) {
	if r := p.rateLocked(now); r != p.conns[conn] {
		p.set(conn, r)
		p.conns[conn] = r
	}
}

// rateLocked returns the bytes a second one background read in progress
// may be sent at, at now; 0: unpaced.
func (p *backgroundPacer) rateLocked(now time.Time) int64 {
	if p.rate <= 0 || p.last.IsZero() || now.Sub(p.last) > foregroundWindow {
		return 0
	}
	return max(p.rate/int64(max(len(p.conns), 1)), 1)
}
