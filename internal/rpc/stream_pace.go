package rpc

import (
	"net"
	"sync"
	"sync/atomic"
)

// readClass is what a read is to the server's pacing: a client's read, a
// clone's background read, or an urgent clone's read (a chunk with no
// other live replica than this server's).
type readClass uint8

const (
	foregroundRead readClass = iota
	backgroundRead
	urgentRead
)

// readCounts is how many reads of each class are in progress.
type readCounts struct{ foreground, background, urgent int }

// readPace is the pacing rule: the pace, in bytes a second (0: none), of
// a read of class c while n reads are in progress, under a background
// rate (StreamConfig.BackgroundRate) and a yield rate
// (StreamConfig.YieldRate). An urgent read is never paced. While one is
// in progress, the other reads, clients' and clones', share yield: a
// chunk one failure from loss leaves first, whoever else reads from its
// one holder. Otherwise clients' reads are not paced and the background
// reads share rate. A rate of 0 paces nothing.
func readPace(c readClass, n readCounts, rate, yield int64) int64 {
	var pace int64
	if c == urgentRead {
		return 0
	}
	if c == backgroundRead && rate > 0 {
		pace = max(rate/int64(max(n.background, 1)), 1)
	}
	if n.urgent > 0 && yield > 0 {
		share := max(yield/int64(max(n.foreground+n.background, 1)), 1)
		if pace == 0 || share < pace {
			pace = share
		}
	}
	return pace
}

// readPacer paces a server's reads on their sockets by readPace: the
// background reads (the clones this server is the source of) at their
// share of the outbound clone-source throttle, whether or not clients
// are reading, and, while an urgent clone is sourced, the clients' reads
// and the background ones at their share of the yield rate. A clone sent
// unpaced leaves at what TCP takes: its pieces arrive at the target in
// bursts at the whole NIC's rate, and the target's switch port, its clone
// throttle notwithstanding, fills its queue, which the requests and ACKs
// of the target's own readers then wait behind. Paced, the clone's bytes
// arrive as smoothly as they leave.
type readPacer struct {
	rate  int64                 // bytes a second the background reads share; 0: never paced
	yield int64                 // bytes a second the other reads share while an urgent one runs; 0: they do not yield
	set   func(net.Conn, int64) // sets a connection's pace (setPacing; 0: none)

	begun [urgentRead + 1]atomic.Int64 // reads begun since the start, by class
	paced atomic.Int64                 // reads given a pace at some time, counted when first paced

	mu     sync.Mutex // guards counts and conns
	counts readCounts
	conns  map[net.Conn]pacedRead // the connections of reads in progress that pacing concerns
}

// pacedRead is a read in progress: its class, the pace set on its
// connection and whether one was ever set.
type pacedRead struct {
	class  readClass
	pace   int64
	slowed bool
}

// ReadTotals counts the reads a stream server has served since it
// started, by kind: clients' (Foreground), paced clones' (Background) and
// urgent clones' (Urgent); Paced counts those of them, of any kind, that
// were paced at some time (an urgent read never is).
type ReadTotals struct{ Foreground, Background, Urgent, Paced int64 }

// totals returns the pacer's counts of reads.
func (p *readPacer) totals() ReadTotals {
	return ReadTotals{Foreground: p.begun[foregroundRead].Load(), Background: p.begun[backgroundRead].Load(),
		Urgent: p.begun[urgentRead].Load(), Paced: p.paced.Load()}
}

func newReadPacer(rate, yield int64, set func(net.Conn, int64)) *readPacer {
	return &readPacer{rate: rate, yield: yield, set: set, conns: make(map[net.Conn]pacedRead)}
}

// begin counts a read of class c on conn and paces it until end is
// called, which lifts its pace; both re-pace the other reads in progress.
// Without a yield rate a client's read concerns no one and is counted
// only in the totals.
func (p *readPacer) begin(conn net.Conn, c readClass) (end func()) {
	p.begun[c].Add(1)
	if c == foregroundRead && p.yield <= 0 {
		return func() {}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts.add(c, 1)
	p.conns[conn] = pacedRead{class: c}
	p.repaceLocked()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.conns[conn].pace != 0 {
			p.set(conn, 0)
		}
		delete(p.conns, conn)
		p.counts.add(c, -1)
		p.repaceLocked()
	}
}

// add counts d more reads of class c.
func (n *readCounts) add(c readClass, d int) {
	switch c {
	case foregroundRead:
		n.foreground += d
	case backgroundRead:
		n.background += d
	case urgentRead:
		n.urgent += d
	}
}

// repaceLocked sets every read's pace to what readPace gives it now.
func (p *readPacer) repaceLocked() {
	for conn, r := range p.conns {
		if pace := readPace(r.class, p.counts, p.rate, p.yield); pace != r.pace {
			p.set(conn, pace)
			if pace != 0 && !r.slowed {
				p.paced.Add(1)
			}
			p.conns[conn] = pacedRead{class: r.class, pace: pace, slowed: r.slowed || pace != 0}
		}
	}
}
