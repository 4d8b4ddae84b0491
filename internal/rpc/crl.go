package rpc

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chunkfs/chunkfs/internal/certs"
)

// Revocation. A secure process may hold the cluster CA's certificate
// revocation list (CRL), a file `chunkfs cert revoke` writes. Every TLS
// handshake, on either side, refuses a peer whose certificate the list in
// force revokes: a server before it reads anything from the peer (it
// answers the client's handshake with a refusal instead of tlsAck, so the
// client fails with "certificate revoked" too), a client before it sends
// anything.
//
// The list is reloaded when its file changes: every handshake stats the
// file (a stat is nothing beside a handshake) and reads it again when its
// size, modification time or inode differ from the last read; ReloadCRL
// (SIGHUP) reads it unconditionally. A file that does not parse, is not
// signed by the cluster CA, or is older (a lower CRL number) than the list
// in force leaves that list in force, and is logged once. So is a file that
// disappears: revocations are never dropped silently.
//
// When a new list comes into force, every Mux of the process closes its
// live connections from peers the list revokes, so that a revoked client
// that was connected before loses its connections too, and must
// handshake again to go on.

// CRLFile is the cluster CA's revocation list in a TLS directory.
const CRLFile = "ca.crl"

// ErrRevoked marks a connection refused because a certificate, on either
// side, is on the cluster CA's revocation list.
var ErrRevoked = errors.New("certificate revoked")

// tlsRevoked is what a TLS server writes instead of tlsAck to a peer whose
// certificate is revoked, before closing the connection.
const tlsRevoked = 0x02

// revocations is a process's CRL: the list in force and the file it
// comes from.
type revocations struct {
	path     string
	ca       *x509.Certificate
	optional bool // a missing file, before any list was read, is no list
	log      *slog.Logger

	list atomic.Pointer[certs.RevocationList] // in force; nil: none

	subsMu  sync.Mutex     // guards subs and nextSub
	subs    map[int]func() // called when a new list comes into force
	nextSub int

	mu      sync.Mutex  // guards seen and missing; serialises reloads
	seen    fs.FileInfo // of the file last read, good or bad; nil: none yet
	missing bool        // the file was found missing, and that was reported
}

// WatchCRL makes s refuse peers whose certificates the CRL at path
// revokes, reloading it when it changes. The file must exist and verify
// against the cluster CA now; later failures keep the list in force and
// are logged to log (nil: slog.Default()).
func (s *Security) WatchCRL(path string, log *slog.Logger) error {
	return s.watchCRL(path, false, log)
}

// watchCRL is WatchCRL; optional allows the file to be missing until it
// first appears.
func (s *Security) watchCRL(path string, optional bool, log *slog.Logger) error {
	if s.IsInsecure() {
		return errors.New("tls: a revocation list needs TLS, not --insecure")
	}
	if log == nil {
		log = slog.Default()
	}
	r := &revocations{path: path, ca: s.ca, optional: optional, log: log}
	if _, err := r.reload(true); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	s.crl = r
	return nil
}

// SetCRLLogger sets the logger of reload failures of the CRL s watches.
// Call it before s is used.
func (s *Security) SetCRLLogger(log *slog.Logger) {
	if s != nil && s.crl != nil && log != nil {
		s.crl.log = log
	}
}

// ReloadCRL reads the CRL s watches again, whether or not its file
// changed, and reports whether the list in force changed. On an error the
// list in force stays. Without a CRL it does nothing.
func (s *Security) ReloadCRL() (changed bool, err error) {
	if s.IsInsecure() || s.crl == nil {
		return false, nil
	}
	changed, err = s.crl.reload(true)
	if changed {
		s.crl.notify()
	}
	return changed, err
}

// onRevocation calls fn whenever a new list comes into force, until
// cancel is called. fn must not block.
func (s *Security) onRevocation(fn func()) (cancel func()) {
	if s.IsInsecure() || s.crl == nil {
		return func() {}
	}
	r := s.crl
	r.subsMu.Lock()
	defer r.subsMu.Unlock()
	if r.subs == nil {
		r.subs = map[int]func(){}
	}
	id := r.nextSub
	r.nextSub++
	r.subs[id] = fn
	return func() {
		r.subsMu.Lock()
		defer r.subsMu.Unlock()
		delete(r.subs, id)
	}
}

// notify calls the functions onRevocation registered.
func (r *revocations) notify() {
	r.subsMu.Lock()
	fns := make([]func(), 0, len(r.subs))
	for _, fn := range r.subs {
		fns = append(fns, fn)
	}
	r.subsMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// peerRevoked reports whether the peer of a TLS connection in state st
// presented a certificate the list in force revokes. It does not reload.
func (s *Security) peerRevoked(st tls.ConnectionState) bool {
	if s.IsInsecure() || s.crl == nil || len(st.PeerCertificates) == 0 {
		return false
	}
	return s.crl.list.Load().Revoked(st.PeerCertificates[0])
}

// CRL is the revocation list in force; nil when there is none.
func (s *Security) CRL() *certs.RevocationList {
	if s.IsInsecure() || s.crl == nil {
		return nil
	}
	return s.crl.list.Load()
}

// checkRevoked refuses a handshake's peer whose certificate is revoked,
// first reloading the CRL if its file changed.
func (s *Security) checkRevoked(st tls.ConnectionState) error {
	if s.IsInsecure() || s.crl == nil || len(st.PeerCertificates) == 0 {
		return nil
	}
	s.crl.reloadIfChanged()
	leaf := st.PeerCertificates[0]
	if !s.crl.list.Load().Revoked(leaf) {
		return nil
	}
	return &revokedError{serial: leaf.SerialNumber.Text(16), who: describePeer(leaf)}
}

// describePeer names a peer certificate's holder: its role and name.
func describePeer(c *x509.Certificate) string {
	if id, err := certs.FromCertificate(c); err == nil {
		return string(id.Role) + " " + id.Name
	}
	return c.Subject.CommonName
}

// revokedError is a peer's certificate found on the revocation list.
type revokedError struct {
	serial string // hexadecimal
	who    string // its role and name
}

func (e *revokedError) Error() string {
	return fmt.Sprintf("%v: serial %s (%s) is on the cluster CA's revocation list", ErrRevoked, e.serial, e.who)
}

func (e *revokedError) Unwrap() error { return ErrRevoked }

// errRevokedByPeer is a server's answer tlsRevoked: it found this
// process's certificate revoked.
var errRevokedByPeer = errors.New("refused as revoked")

// reloadIfChanged reloads the list if its file changed, and logs the
// outcome.
func (r *revocations) reloadIfChanged() {
	changed, err := r.reload(false)
	switch {
	case err != nil:
		r.log.Error("revocation list not reloaded; the list in force stays", "err", err)
	case changed:
		l := r.list.Load()
		r.log.Info("revocation list loaded", "path", r.path, "crl_number", l.Number, "revoked", l.Len())
		r.notify()
	}
}

// reload reads the file if force or if it changed since it was last read,
// and puts its list in force if it is good. It reports whether the list in
// force changed, and an error when the file is bad; unless force, a
// version of the file that failed once (or its absence) is not reported
// again.
func (r *revocations) reload(force bool) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.list.Load()
	fi, err := os.Stat(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && r.optional && old == nil:
		return false, nil
	case err != nil && r.missing && !force:
		return false, nil
	case err != nil:
		r.seen, r.missing = nil, true
		return false, fmt.Errorf("revocation list %s: %w", r.path, err)
	case !force && r.seen != nil && sameFile(r.seen, fi):
		return false, nil
	}
	r.seen, r.missing = fi, false
	data, err := os.ReadFile(r.path)
	if err != nil {
		return false, fmt.Errorf("revocation list %s: %w", r.path, err)
	}
	l, err := certs.ParseRevocationList(data, r.ca)
	if err != nil {
		return false, fmt.Errorf("revocation list %s: %w", r.path, err)
	}
	if old != nil {
		switch l.Number.Cmp(old.Number) {
		case -1:
			return false, fmt.Errorf("revocation list %s: CRL number %v is older than the list in force (%v)", r.path, l.Number, old.Number)
		case 0:
			return false, nil
		}
	}
	r.list.Store(l)
	if !l.NextUpdate.IsZero() && time.Now().After(l.NextUpdate) {
		r.log.Warn("revocation list is past its next update; it stays in force: make a new one with chunkfs cert revoke", "path", r.path, "next_update", l.NextUpdate)
	}
	return true, nil
}

// sameFile reports whether two stats are of the same version of a file.
func sameFile(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
