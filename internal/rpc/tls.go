package rpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/chunkfs/chunkfs"
)

// Mutual TLS on the wire. A process's listener is an rpc.Mux, which
// terminates TLS on every accepted connection before it sniffs the
// protocol, so gRPC, the data stream and Raft all see decrypted bytes and
// one handshake covers whichever protocol follows. gRPC is given the
// already-handshaken connection by adoptCreds; dialers (Dial, DataClient,
// DialRaft) handshake themselves.

// HandshakeTimeout bounds every TLS handshake, on either side.
const HandshakeTimeout = 10 * time.Second

// tlsAck is the byte a TLS server writes as soon as its side of the
// handshake succeeds, and every chunkfs client reads before anything else.
// TLS 1.3 finishes the client's side of the handshake before the server
// has checked the client's certificate, so without it a refused client
// would learn of the refusal only on some later read, or as a broken pipe
// in the middle of a write; reading the acknowledgement makes the
// handshake itself fail with the server's alert.
const tlsAck = 0x01

// muxConfig is the server TLS configuration of a Mux: ServerConfig's,
// with HTTP/2 offered by ALPN, as gRPC clients require. It is one
// configuration for every connection, not a copy each: Go makes and
// rotates session ticket keys per configuration, and a ticket must
// outlive its connection for a client to resume the session on a later
// one (ClientConfig). A resumed handshake skips both certificate
// signatures and the verification of the chains. The peer's certificate
// comes back from the ticket and is checked against the revocation list
// as on a full handshake; Go resumes no session whose certificate has
// expired.
func (s *Security) muxConfig() *tls.Config { return s.server }

// ErrCertificate marks a connection refused because a certificate was
// missing, expired or not signed by the cluster CA, on either side.
var ErrCertificate = errors.New("certificate not trusted")

// ErrTLSMismatch marks a connection between a TLS process and a plain-TCP
// one.
var ErrTLSMismatch = errors.New("TLS mismatch")

// tlsFailure turns the error of a TLS handshake (or of the first read
// after it, where TLS 1.3 delivers the server's verdict) with addr into one
// clear line; other errors pass through.
func tlsFailure(addr string, err error) error {
	var verr *tls.CertificateVerificationError
	var op *net.OpError
	var rec tls.RecordHeaderError
	var rev *revokedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &rev):
		return fmt.Errorf("%w: %s presented certificate serial %s (%s), which is on the cluster CA's revocation list", ErrRevoked, addr, rev.serial, rev.who)
	case errors.Is(err, errRevokedByPeer):
		return fmt.Errorf("%w: %s refused this process's certificate: it is on the cluster CA's revocation list", ErrRevoked, addr)
	case errors.As(err, &verr):
		return fmt.Errorf("%w: %s presented a certificate that does not verify against this process's CA: %v", ErrCertificate, addr, verr.Err)
	case errors.As(err, &op) && op.Op == "remote error":
		return fmt.Errorf("%w: %s refused this process's certificate (%v)", ErrCertificate, addr, op.Err)
	case errors.As(err, &rec):
		return fmt.Errorf("%w: %s does not speak TLS (it runs --insecure; give this process --insecure too)", ErrTLSMismatch, addr)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("%w: %s closed the connection during the TLS handshake (it may run --insecure): %v", ErrTLSMismatch, addr, err)
	}
	return err
}

// tlsRefusal recovers, from the message of a gRPC call that failed in the
// transport, a TLS refusal that clientCreds reported (tlsFailure), as an
// error wrapping ErrCertificate, ErrTLSMismatch or ErrRevoked; nil for any other
// failure. gRPC keeps only the text of a handshake's error, and this is
// the one place that reads it: the text is tlsFailure's own.
func tlsRefusal(msg string) error {
	for _, e := range []error{ErrCertificate, ErrTLSMismatch, ErrRevoked} {
		if i := strings.Index(msg, e.Error()+": "); i >= 0 {
			rest := strings.ReplaceAll(strings.TrimSuffix(msg[i+len(e.Error())+2:], `"`), `\"`, `"`)
			return fmt.Errorf("%w: %s", e, rest)
		}
	}
	return nil
}

// failureKind is the chunkfs Kind of a connection that failed for a TLS
// reason: KindPermission, as no retry elsewhere can cure a certificate;
// else KindUnavailable.
func failureKind(err error) chunkfs.Kind {
	if errors.Is(err, ErrCertificate) || errors.Is(err, ErrTLSMismatch) || errors.Is(err, ErrRevoked) {
		return chunkfs.KindPermission
	}
	return chunkfs.KindUnavailable
}

// clientTLS runs the client side of a TLS handshake with addr on conn,
// bounded by HandshakeTimeout and ctx, and reads the server's
// acknowledgement; it closes conn if either fails.
func (s *Security) clientTLS(ctx context.Context, conn net.Conn, addr string) (*tls.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, HandshakeTimeout)
	defer cancel()
	tc := tls.Client(conn, s.ClientConfig(addr))
	err := tc.HandshakeContext(ctx)
	if err == nil {
		err = readAck(ctx, tc)
	}
	if err != nil {
		conn.Close()
		return nil, tlsFailure(addr, err)
	}
	return tc, nil
}

// readAck reads a TLS server's acknowledgement (tlsAck) from conn by
// ctx's deadline.
func readAck(ctx context.Context, conn net.Conn) error {
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Now().Add(HandshakeTimeout)
	}
	conn.SetReadDeadline(d)
	defer conn.SetReadDeadline(time.Time{})
	var ack [1]byte
	if _, err := io.ReadFull(conn, ack[:]); err != nil {
		return err
	}
	switch ack[0] {
	case tlsAck:
		return nil
	case tlsRevoked:
		return errRevokedByPeer
	}
	return protocolError("bad TLS acknowledgement %#x", ack[0])
}

// acceptTLS finishes the server side of a TLS connection whose handshake
// succeeded, in state st: it refuses a peer whose certificate is revoked, answering
// tlsRevoked, and acknowledges any other (tlsAck), within
// HandshakeTimeout. The caller closes conn on an error.
func (s *Security) acceptTLS(conn net.Conn, st tls.ConnectionState) error {
	conn.SetWriteDeadline(time.Now().Add(HandshakeTimeout))
	defer conn.SetWriteDeadline(time.Time{})
	if err := s.checkRevoked(st); err != nil {
		conn.Write([]byte{tlsRevoked})
		return err
	}
	_, err := conn.Write([]byte{tlsAck})
	return err
}

// writeMagic writes a connection's magic (StreamMagic, RaftMagic) within
// timeout.
func writeMagic(conn net.Conn, magic string, timeout time.Duration) error {
	conn.SetWriteDeadline(time.Now().Add(timeout))
	defer conn.SetWriteDeadline(time.Time{})
	_, err := io.WriteString(conn, magic)
	return err
}

// adoptCreds are the gRPC server's transport credentials. A connection
// that comes from a TLS Mux is already a handshaken TLS connection: it is
// adopted as it is and its state returned as credentials.TLSInfo, so
// PeerIdentity works in handlers. Any other connection (a server on a
// listener of its own) is handshaken by gRPC's own TLS credentials when
// the process is secure, or passed through plain when it is not.
type adoptCreds struct {
	sec  *Security
	tls  credentials.TransportCredentials // nil when insecure
	none credentials.TransportCredentials
}

func newAdoptCreds(sec *Security) *adoptCreds {
	c := &adoptCreds{sec: sec, none: insecure.NewCredentials()}
	if !sec.IsInsecure() {
		c.tls = credentials.NewTLS(sec.ServerConfig())
	}
	return c
}

func (c *adoptCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if tc, ok := conn.(tlsConn); ok && tc.ConnectionState().HandshakeComplete {
		return conn, credentials.TLSInfo{
			State:          tc.ConnectionState(),
			CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
		}, nil
	}
	if c.tls != nil {
		conn.SetDeadline(time.Now().Add(HandshakeTimeout))
		nc, info, err := c.tls.ServerHandshake(conn)
		if err == nil {
			st, _ := info.(credentials.TLSInfo)
			err = c.sec.acceptTLS(nc, st.State)
		}
		if err != nil {
			conn.Close()
			return nil, nil, err
		}
		conn.SetDeadline(time.Time{})
		return nc, info, nil
	}
	return c.none.ServerHandshake(conn)
}

func (c *adoptCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("rpc: server credentials used to dial")
}

func (c *adoptCreds) Info() credentials.ProtocolInfo {
	if c.tls != nil {
		return c.tls.Info()
	}
	return c.none.Info()
}

func (c *adoptCreds) Clone() credentials.TransportCredentials { return newAdoptCreds(c.sec) }

func (c *adoptCreds) OverrideServerName(string) error { return nil }

// clientCreds are gRPC's own TLS credentials with the handshake's errors
// made clear (tlsFailure).
type clientCreds struct {
	credentials.TransportCredentials
}

func (c clientCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, conn)
	if err == nil {
		if err = readAck(ctx, nc); err != nil {
			nc.Close()
		}
	}
	if err != nil {
		return nil, nil, tlsFailure(authority, err)
	}
	return nc, info, nil
}

func (c clientCreds) Clone() credentials.TransportCredentials {
	return clientCreds{c.TransportCredentials.Clone()}
}

// dialCreds are the transport credentials of a gRPC dial to addr.
func (s *Security) dialCreds(addr string) credentials.TransportCredentials {
	if s.IsInsecure() {
		return insecure.NewCredentials()
	}
	return clientCreds{credentials.NewTLS(s.ClientConfig(addr))}
}

// requiresTLS is what a TLS server answers a plain-TCP client with.
const requiresTLS = "server requires TLS: give this process --tls-dir (or --cert, --key and --ca) from the cluster's CA"

// refusePlain answers a plain-TCP connection to a TLS Mux, whose first
// bytes were head, in the protocol it speaks, so that its client fails
// with that clear line instead of a broken connection: every data-stream
// request with an error frame (by a StreamServer whose handler refuses
// all), the first gRPC call with status Unauthenticated.
func (m *Mux) refusePlain(conn net.Conn, head []byte) {
	switch string(head) {
	case StreamMagic:
		if r := m.refuser(); r != nil {
			r.ServeConn(&prefixConn{Conn: conn, prefix: head})
		}
	case http2Preface[:4]:
		refuseGRPC(&prefixConn{Conn: conn, prefix: head})
	}
	conn.Close()
}

// refuser returns the Mux's StreamServer of plain-TCP connections; nil
// once the Mux is closed.
func (m *Mux) refuser() *StreamServer {
	m.refuseOnce.Do(func() {
		cfg := DefaultStreamConfig()
		cfg.Logger, cfg.IdleTimeout, cfg.FrameTimeout = m.log, sniffTimeout, sniffTimeout
		m.refuse, _ = NewStreamServer(refuseHandler{}, cfg)
	})
	return m.refuse
}

var errRequiresTLS = &chunkfs.Error{Kind: chunkfs.KindPermission, Err: errors.New(requiresTLS)}

// refuseHandler refuses every data-stream request.
type refuseHandler struct{}

func (refuseHandler) BeginPush(chunkfs.DataID, int64) ([]byte, func([]uint32, bool), error) {
	return nil, nil, errRequiresTLS
}

func (refuseHandler) ReadChunk(chunkfs.Handle, chunkfs.Version, int64, []byte, []uint32) (int, []uint32, error) {
	return 0, nil, errRequiresTLS
}

// refuseGRPC answers the first call of a plain HTTP/2 connection with
// status Unauthenticated and requiresTLS, then closes it. The deadline set
// by the Mux bounds it.
func refuseGRPC(conn net.Conn) {
	preface := make([]byte, len(http2Preface))
	if _, err := io.ReadFull(conn, preface); err != nil || string(preface) != http2Preface {
		return
	}
	fr := http2.NewFramer(conn, conn)
	if fr.WriteSettings() != nil {
		return
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() && fr.WriteSettingsAck() != nil {
				return
			}
		case *http2.HeadersFrame:
			var block bytes.Buffer
			enc := hpack.NewEncoder(&block)
			for _, hf := range [][2]string{{":status", "200"}, {"content-type", "application/grpc"},
				{"grpc-status", strconv.Itoa(int(codes.Unauthenticated))}, {"grpc-message", requiresTLS}} {
				enc.WriteField(hpack.HeaderField{Name: hf[0], Value: hf[1]})
			}
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
			fr.WriteGoAway(f.StreamID, http2.ErrCodeNo, []byte(requiresTLS))
			return
		}
	}
}

// isTLSHello reports whether a connection's first bytes are a TLS
// handshake record.
func isTLSHello(head []byte) bool { return len(head) >= 2 && head[0] == 0x16 && head[1] == 0x03 }
