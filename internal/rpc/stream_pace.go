package rpc

import (
	"net"
	"sync"
)

// backgroundPacer is a server's outbound clone-source throttle: the
// background reads in progress (the reads of clones this server is the
// source of) share rate, each paced at rate/n on its socket for as long as
// it runs, whether or not clients are reading. A clone sent unpaced leaves
// at what TCP takes: its pieces arrive at the target in bursts at the
// whole NIC's rate, and the target's switch port, its clone throttle
// notwithstanding, fills its queue, which the requests and ACKs of the
// target's own readers then wait behind. Paced, the clone's bytes arrive
// as smoothly as they leave.
type backgroundPacer struct {
	rate int64                 // bytes a second; 0: background reads are never paced
	set  func(net.Conn, int64) // sets a connection's pace (setPacing; 0: none)

	mu    sync.Mutex         // guards conns
	conns map[net.Conn]int64 // the connections of background reads in progress, and the pace set on each
}

func newBackgroundPacer(rate int64, set func(net.Conn, int64)) *backgroundPacer {
	return &backgroundPacer{rate: rate, set: set, conns: make(map[net.Conn]int64)}
}

// begin paces a background read on conn until end is called, which lifts
// its pace; both re-pace the other reads in progress to their new share.
func (p *backgroundPacer) begin(conn net.Conn) (end func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[conn] = 0
	p.repaceLocked()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.conns[conn] != 0 {
			p.set(conn, 0)
		}
		delete(p.conns, conn)
		p.repaceLocked()
	}
}

// repaceLocked sets every background read's pace to its share of rate.
func (p *backgroundPacer) repaceLocked() {
	if p.rate <= 0 {
		return
	}
	share := max(p.rate/int64(max(len(p.conns), 1)), 1)
	for conn, r := range p.conns {
		if r != share {
			p.set(conn, share)
			p.conns[conn] = share
		}
	}
}
