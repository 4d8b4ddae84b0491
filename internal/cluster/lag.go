package cluster

import (
	"net"
	"sync"
)

// A group master's Raft input can be held back (PauseRaft), so that it
// falls behind the log as a slow or distant observer would, while it goes
// on answering clients.

// raftGate holds back reads on the Raft connections a master accepts.
type raftGate struct {
	mu   sync.Mutex    // guards open
	open chan struct{} // closed while reads flow
}

func newRaftGate() *raftGate {
	g := &raftGate{open: make(chan struct{})}
	close(g.open)
	return g
}

// set opens (true) or holds (false) the gate.
func (g *raftGate) set(flow bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		if !flow {
			g.open = make(chan struct{})
		}
	default:
		if flow {
			close(g.open)
		}
	}
}

func (g *raftGate) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// gatedListener wraps every accepted connection in the gate.
type gatedListener struct {
	net.Listener
	g *raftGate
}

func (l gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, g: l.g, closed: make(chan struct{})}, nil
}

type gatedConn struct {
	net.Conn
	g      *raftGate
	once   sync.Once
	closed chan struct{}
}

// Read waits for the gate before reading and again before handing over
// what it read, so that bytes a read already under way receives while the
// gate is held wait too.
func (c *gatedConn) Read(p []byte) (int, error) {
	if !c.pass() {
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(p)
	if !c.pass() {
		return 0, net.ErrClosed
	}
	return n, err
}

// pass waits until the gate is open; false when the connection closed.
func (c *gatedConn) pass() bool {
	select {
	case <-c.g.wait():
		return true
	case <-c.closed:
		return false
	}
}

func (c *gatedConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// PauseRaft holds back (pause true) or lets through again the Raft
// traffic group master i receives: held back, it applies nothing new but
// still serves reads at the state it has, as a lagging observer does.
func (c *Cluster) PauseRaft(i int, pause bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.group[i].gate.set(!pause)
}
