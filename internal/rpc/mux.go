package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chunkfs/chunkfs/internal/certs"
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
//
// A Mux of a secure process terminates TLS first: it handshakes each
// connection (bounded by HandshakeTimeout), requiring a client certificate
// of the cluster CA, and sniffs the decrypted bytes; the connections it
// hands on are TLS connections (ConnIdentity works on them, and gRPC
// adopts them, see adoptCreds). A plain-TCP client is refused in its own
// protocol with "server requires TLS"; a TLS client of a plain Mux is
// closed and logged.
type Mux struct {
	lis  net.Listener
	sec  *Security
	log  *slog.Logger
	grpc *muxListener
	data *muxListener
	raft atomic.Pointer[muxListener] // set by Raft; nil: Raft connections are refused

	refuseOnce sync.Once
	refuse     *StreamServer // answers plain-TCP data streams of a TLS Mux

	liveMu  sync.Mutex // guards live
	live    map[*liveConn]struct{}
	unwatch func() // ends the Mux's subscription to new revocation lists

	closeOnce sync.Once
	done      chan struct{} // closed by Close
}

// NewMux returns a plain-TCP multiplexer of lis; call Serve to start it.
func NewMux(lis net.Listener, log *slog.Logger) *Mux { return (*Security)(nil).NewMux(lis, log) }

// NewMux returns a multiplexer of lis whose connections use s (nil:
// plain TCP); call Serve to start it.
func (s *Security) NewMux(lis net.Listener, log *slog.Logger) *Mux {
	if log == nil {
		log = slog.Default()
	}
	m := &Mux{lis: lis, sec: s, log: log, done: make(chan struct{}), live: map[*liveConn]struct{}{}}
	m.grpc = &muxListener{m: m, conns: make(chan net.Conn)}
	m.data = &muxListener{m: m, conns: make(chan net.Conn)}
	m.unwatch = s.onRevocation(m.closeRevoked)
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

// DialRaft connects to the Raft transport behind a plain-TCP Mux at addr.
func DialRaft(addr string, timeout time.Duration) (net.Conn, error) {
	return (*Security)(nil).DialRaft(addr, timeout)
}

// DialRaft connects to the Raft transport behind a Mux at addr, over TLS
// unless s is insecure.
func (s *Security) DialRaft(addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if !s.IsInsecure() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if conn, err = s.clientTLS(ctx, conn, addr); err != nil {
			return nil, err
		}
	}
	if err := writeMagic(conn, RaftMagic, timeout); err != nil {
		conn.Close()
		return nil, err
	}
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

// sniff terminates TLS on a connection, when the Mux is secure, reads its
// first bytes and dispatches it.
func (m *Mux) sniff(conn net.Conn) {
	conn.SetDeadline(time.Now().Add(sniffTimeout))
	head, err := readHead(conn)
	if err != nil {
		m.log.Debug("connection closed before its first bytes", "remote", conn.RemoteAddr(), "err", err)
		conn.Close()
		return
	}
	switch {
	case !m.sec.IsInsecure() && !isTLSHello(head):
		m.log.Warn("plain-TCP connection refused: this server requires TLS", "remote", conn.RemoteAddr())
		m.refusePlain(conn, head)
		return
	case m.sec.IsInsecure() && isTLSHello(head):
		m.log.Warn("TLS connection refused: this server runs without TLS (--insecure)", "remote", conn.RemoteAddr())
		conn.Close()
		return
	case !m.sec.IsInsecure():
		if conn, head, err = m.handshake(conn, head); err != nil {
			msg := "TLS handshake failed"
			if errors.Is(err, ErrRevoked) {
				msg = "connection refused: certificate revoked"
			}
			m.log.Warn(msg, "remote", conn.RemoteAddr(), "err", err)
			conn.Close()
			return
		}
	}
	m.dispatch(conn, head)
}

// readHead reads a connection's first four bytes.
func readHead(conn net.Conn) ([]byte, error) {
	head := make([]byte, 4)
	if _, err := io.ReadFull(conn, head); err != nil {
		return nil, err
	}
	return head, nil
}

// handshake runs the server side of TLS on conn, whose first bytes, head,
// were already read, acknowledges it (tlsAck), and reads the first bytes
// of the decrypted stream.
// The deadline set by sniff bounds both.
func (m *Mux) handshake(conn net.Conn, head []byte) (net.Conn, []byte, error) {
	tc := tls.Server(&prefixConn{Conn: conn, prefix: head}, m.sec.muxConfig())
	if err := tc.Handshake(); err != nil {
		return conn, nil, err
	}
	if err := m.sec.acceptTLS(tc, tc.ConnectionState()); err != nil {
		return conn, nil, err
	}
	head, err := readHead(tc)
	if err != nil {
		return conn, nil, err
	}
	return m.track(tc), head, nil
}

// liveConn is a TLS connection a Mux accepted, known to it until it is
// closed, so that it can be closed when its peer's certificate is
// revoked.
type liveConn struct {
	*tls.Conn
	m *Mux
}

// Close forgets the connection and closes it.
func (c *liveConn) Close() error {
	c.m.liveMu.Lock()
	delete(c.m.live, c)
	c.m.liveMu.Unlock()
	return c.Conn.Close()
}

// track makes tc one of the Mux's live connections.
func (m *Mux) track(tc *tls.Conn) *liveConn {
	c := &liveConn{Conn: tc, m: m}
	m.liveMu.Lock()
	m.live[c] = struct{}{}
	m.liveMu.Unlock()
	return c
}

// closeRevoked closes the live connections whose peers' certificates the
// revocation list in force revokes.
func (m *Mux) closeRevoked() {
	m.liveMu.Lock()
	var gone []*liveConn
	for c := range m.live {
		if m.sec.peerRevoked(c.ConnectionState()) {
			gone = append(gone, c)
		}
	}
	m.liveMu.Unlock()
	for _, c := range gone {
		st := c.ConnectionState()
		m.log.Warn("connection closed: certificate revoked", "remote", c.RemoteAddr(), "peer", describePeer(st.PeerCertificates[0]))
		c.Close()
	}
}

// dispatch hands a connection whose first bytes were head to its listener.
func (m *Mux) dispatch(conn net.Conn, head []byte) {
	conn.SetDeadline(time.Time{})
	var to *muxListener
	var pc net.Conn = &prefixConn{Conn: conn, prefix: head}
	switch string(head) {
	case http2Preface[:4]:
		to = m.grpc
	case StreamMagic:
		to = m.data
	case RaftMagic:
		to, pc = m.raft.Load(), conn
		if !m.sec.IsInsecure() && to != nil && !isMaster(conn) {
			m.log.Warn("Raft connection refused: the peer's certificate is not a master's", "remote", conn.RemoteAddr())
			conn.Close()
			return
		}
	}
	if to == nil {
		m.log.Warn("connection closed: unknown protocol", "remote", conn.RemoteAddr(), "first_bytes", head)
		conn.Close()
		return
	}
	select {
	case to.conns <- pc:
	case <-m.done:
		conn.Close()
	}
}

// isMaster reports whether conn's peer presented a master's certificate:
// only masters speak Raft.
func isMaster(conn net.Conn) bool {
	id, ok := ConnIdentity(conn)
	return ok && id.Role == certs.RoleMaster
}

// Close stops Serve, closes the listener, and makes Accept on both child
// listeners fail.
func (m *Mux) Close() error {
	var err error
	m.closeOnce.Do(func() {
		m.unwatch()
		close(m.done)
		err = m.lis.Close()
		m.refuseOnce.Do(func() {}) // no refuser after Close
		if m.refuse != nil {
			m.refuse.Close()
		}
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

// ConnectionState is the TLS state of the connection under c; the zero
// state when it is plain TCP.
func (c *prefixConn) ConnectionState() tls.ConnectionState {
	if tc, ok := c.Conn.(tlsConn); ok {
		return tc.ConnectionState()
	}
	return tls.ConnectionState{}
}
