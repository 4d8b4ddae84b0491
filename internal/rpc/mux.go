package rpc

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// http2Preface is how every gRPC (HTTP/2) connection starts; its first four
// bytes are enough to tell it from the data stream's StreamMagic.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// sniffTimeout bounds the wait for a new connection's first bytes.
const sniffTimeout = 10 * time.Second

// RaftMagic opens every connection between masters' Raft transports on a
// master's one port (DialRaft writes it; the Mux strips it).
const RaftMagic = "CKR1"

// Mux shares one listener between gRPC, the data stream and Raft: it reads
// the first four bytes of each accepted connection, in a goroutine of its
// own, and hands the connection to the GRPC or the Data listener (bytes
// replayed) or to the Raft listener (RaftMagic consumed). A connection that
// starts with anything else is closed.
type Mux struct {
	lis  net.Listener
	log  *slog.Logger
	grpc *muxListener
	data *muxListener
	raft atomic.Pointer[muxListener] // set by Raft; nil: Raft connections are refused

	closeOnce sync.Once
	done      chan struct{} // closed by Close
}

// NewMux returns a multiplexer of lis; call Serve to start it.
func NewMux(lis net.Listener, log *slog.Logger) *Mux {
	if log == nil {
		log = slog.Default()
	}
	m := &Mux{lis: lis, log: log, done: make(chan struct{})}
	m.grpc = &muxListener{m: m, conns: make(chan net.Conn)}
	m.data = &muxListener{m: m, conns: make(chan net.Conn)}
	return m
}

// GRPC returns the listener of gRPC connections.
func (m *Mux) GRPC() net.Listener { return m.grpc }

// Data returns the listener of data-stream connections.
func (m *Mux) Data() net.Listener { return m.data }

// Raft returns the listener of Raft connections from other masters. Until
// it is first called, the Mux closes connections that open with
// RaftMagic, as it does unknown ones: a chunkserver has no Raft.
func (m *Mux) Raft() net.Listener {
	l := &muxListener{m: m, conns: make(chan net.Conn)}
	if m.raft.CompareAndSwap(nil, l) {
		return l
	}
	return m.raft.Load()
}

// DialRaft connects to the Raft transport behind a Mux at addr.
func DialRaft(addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, RaftMagic); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

// Serve accepts connections until the listener fails or Close is called.
func (m *Mux) Serve() error {
	var delay time.Duration
	for {
		conn, err := m.lis.Accept()
		if err != nil {
			select {
			case <-m.done:
				return nil
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		go m.sniff(conn)
	}
}

// sniff reads a connection's first bytes and dispatches it.
func (m *Mux) sniff(conn net.Conn) {
	conn.SetReadDeadline(time.Now().Add(sniffTimeout))
	var head [4]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		m.log.Debug("connection closed before its first bytes", "remote", conn.RemoteAddr(), "err", err)
		conn.Close()
		return
	}
	conn.SetReadDeadline(time.Time{})
	var to *muxListener
	var pc net.Conn = &prefixConn{Conn: conn, prefix: head[:]}
	switch string(head[:]) {
	case http2Preface[:4]:
		to = m.grpc
	case StreamMagic:
		to = m.data
	case RaftMagic:
		to, pc = m.raft.Load(), conn
	}
	if to == nil {
		m.log.Warn("connection closed: unknown protocol", "remote", conn.RemoteAddr(), "first_bytes", head[:])
		conn.Close()
		return
	}
	select {
	case to.conns <- pc:
	case <-m.done:
		conn.Close()
	}
}

// Close stops Serve, closes the listener, and makes Accept on both child
// listeners fail.
func (m *Mux) Close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.done)
		err = m.lis.Close()
	})
	return err
}

// muxListener is one side of a Mux.
type muxListener struct {
	m     *Mux
	conns chan net.Conn
}

func (l *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.m.done:
		return nil, net.ErrClosed
	}
}

// Close closes the whole Mux.
func (l *muxListener) Close() error { return l.m.Close() }

func (l *muxListener) Addr() net.Addr { return l.m.lis.Addr() }

// prefixConn replays the bytes the Mux read before the rest of the stream.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
