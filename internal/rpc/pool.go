package rpc

import (
	"sync"

	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Pool keeps one gRPC client connection per address, opened on first use and
// shared by every caller. It is safe for concurrent use.
type Pool struct {
	sec    *Security
	mu     sync.Mutex // guards conns and closed
	conns  map[string]*ClientConn
	closed bool
}

// NewPool returns an empty pool of plain-TCP connections.
func NewPool() *Pool { return (*Security)(nil).NewPool() }

// NewPool returns an empty pool whose connections s secures (nil: plain
// TCP).
func (s *Security) NewPool() *Pool { return &Pool{sec: s, conns: make(map[string]*ClientConn)} }

// Conn returns the connection to addr, dialing it if needed.
func (p *Pool) Conn(addr string) (*ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPoolClosed
	}
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	cc, err := p.sec.Dial(addr)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = cc
	return cc, nil
}

// ChunkServer returns a ChunkServer client for addr.
func (p *Pool) ChunkServer(addr string) (pb.ChunkServerClient, error) {
	cc, err := p.Conn(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewChunkServerClient(cc), nil
}

// Master returns a Master client for addr.
func (p *Pool) Master(addr string) (pb.MasterClient, error) {
	cc, err := p.Conn(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewMasterClient(cc), nil
}

// Forget closes and drops the connection to addr, if any.
func (p *Pool) Forget(addr string) {
	p.mu.Lock()
	cc := p.conns[addr]
	delete(p.conns, addr)
	p.mu.Unlock()
	if cc != nil {
		cc.Close()
	}
}

// Close closes every connection; later calls to Conn fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for addr, cc := range p.conns {
		cc.Close()
		delete(p.conns, addr)
	}
	return nil
}
