package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/chunkfs/chunkfs/internal/certs"
)

// Security is how one process authenticates its connections: mutual TLS
// with certificates of one cluster CA, or none at all (Insecure). Every
// connection a process opens or accepts — gRPC, the data stream, Raft —
// goes through the same Security, so a process is either all TLS or all
// plain TCP.
//
// The zero value is not usable; nil means Insecure wherever a *Security is
// taken.
type Security struct {
	insecure bool
	self     certs.Identity
	cert     tls.Certificate
	roots    *x509.CertPool
	ca       *x509.Certificate // the cluster CA, which signs the CRL
	crl      *revocations      // nil: no revocation list
	server   *tls.Config       // the Mux's, made once (muxConfig)
	sessions tls.ClientSessionCache
}

// sessionCacheSize bounds the TLS sessions a process keeps for resuming,
// one per server host: a chunkserver's peers, a client's chunkservers.
const sessionCacheSize = 256

// Insecure returns the Security of plain TCP: no certificate is presented
// or checked and PeerIdentity finds nothing.
func Insecure() *Security { return &Security{insecure: true} }

// The files of a TLS directory, as `chunkfs cert issue` writes them.
const (
	CAFile   = "ca.crt"
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// LoadSecurity reads a TLS directory: ca.crt, tls.crt and tls.key, and
// watches its ca.crl, the cluster CA's revocation list, which may appear
// later (see WatchCRL). A CRL file that exists must be good.
func LoadSecurity(dir string) (*Security, error) {
	s, err := LoadSecurityFiles(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile), filepath.Join(dir, CAFile))
	if err != nil {
		return nil, err
	}
	if err := s.watchCRL(filepath.Join(dir, CRLFile), true, nil); err != nil {
		return nil, err
	}
	return s, nil
}

// LoadSecurityFiles reads a certificate, its key and the cluster CA's
// certificate from three PEM files.
func LoadSecurityFiles(certFile, keyFile, caFile string) (*Security, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls: %s: %w", certFile, err)
	}
	self, err := certs.FromCertificate(leaf)
	if err != nil {
		return nil, fmt.Errorf("tls: %s: %w", certFile, err)
	}
	cert.Leaf = leaf
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("tls: %s holds no PEM certificate", caFile)
	}
	s := &Security{self: self, cert: cert, roots: roots, ca: firstCert(caPEM), sessions: tls.NewLRUClientSessionCache(sessionCacheSize)}
	s.server = &tls.Config{
		Certificates: []tls.Certificate{s.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    s.roots,
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{"h2"}, // gRPC clients require it
	}
	return s, nil
}

// IsInsecure reports whether s is plain TCP (s may be nil).
func (s *Security) IsInsecure() bool { return s == nil || s.insecure }

// Identity is the identity of this process's own certificate; the zero
// Identity when insecure.
func (s *Security) Identity() certs.Identity {
	if s.IsInsecure() {
		return certs.Identity{}
	}
	return s.self
}

// ServerConfig is the TLS configuration of a listener: present this
// process's certificate, require and verify the peer's against the CA.
// Revocation is checked after the handshake (serverAccept), so that the
// client learns why it is refused. Nil when insecure.
func (s *Security) ServerConfig() *tls.Config {
	if s.IsInsecure() {
		return nil
	}
	return s.server.Clone()
}

// ClientConfig is the TLS configuration of a dial to addr: present this
// process's certificate, verify the server's against the CA and against
// addr's host, and resume a session with that host when the process
// holds one (see ServerConfig). Nil when insecure.
func (s *Security) ClientConfig(addr string) *tls.Config {
	if s.IsInsecure() {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return &tls.Config{
		Certificates:       []tls.Certificate{s.cert},
		RootCAs:            s.roots,
		ServerName:         host,
		MinVersion:         tls.VersionTLS13,
		ClientSessionCache: s.sessions,
		VerifyConnection: func(st tls.ConnectionState) error {
			return s.checkRevoked(st)
		},
	}
}

// ErrNoIdentity is returned where a connection carries no verified
// certificate identity (plain TCP).
var ErrNoIdentity = errors.New("no certificate identity")

// PeerIdentity is the verified certificate identity of the peer of a gRPC
// call's connection; ok is false on a plain connection.
func PeerIdentity(ctx context.Context) (id certs.Identity, ok bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return certs.Identity{}, false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return certs.Identity{}, false
	}
	return stateIdentity(info.State)
}

// ConnIdentity is the verified certificate identity of the peer of a data
// stream or Raft connection; ok is false on a plain connection. The TLS
// handshake must be complete.
func ConnIdentity(c net.Conn) (id certs.Identity, ok bool) {
	tc, ok := c.(tlsConn)
	if !ok {
		return certs.Identity{}, false
	}
	return stateIdentity(tc.ConnectionState())
}

// tlsConn is a connection that knows its TLS state: *tls.Conn, and any
// wrapper of one (the Mux's prefixConn) that passes the state on.
type tlsConn interface {
	net.Conn
	ConnectionState() tls.ConnectionState
}

func stateIdentity(st tls.ConnectionState) (certs.Identity, bool) {
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return certs.Identity{}, false
	}
	id, err := certs.FromCertificate(st.PeerCertificates[0])
	if err != nil {
		return certs.Identity{}, false
	}
	return id, true
}

// firstCert is the first certificate of a PEM bundle: the CA whose
// revocation list a process takes.
func firstCert(data []byte) *x509.Certificate {
	for {
		b, rest := pem.Decode(data)
		if b == nil {
			return nil
		}
		if b.Type == "CERTIFICATE" {
			if c, err := x509.ParseCertificate(b.Bytes); err == nil {
				return c
			}
		}
		data = rest
	}
}

// Certificate is this process's own certificate; nil when insecure.
func (s *Security) Certificate() *x509.Certificate {
	if s.IsInsecure() {
		return nil
	}
	return s.cert.Leaf
}
