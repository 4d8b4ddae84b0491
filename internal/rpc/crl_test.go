package rpc

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/certs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"google.golang.org/grpc"
)

// writeCRL writes a CRL of ca numbered number revoking secs' certificates
// to the TLS directory of name, replacing the file in one rename as an
// operator's copy would.
func (p *testPKI) writeCRL(ca *certs.CA, name string, number int64, secs ...*Security) {
	p.t.Helper()
	var entries []x509.RevocationListEntry
	for _, s := range secs {
		entries = append(entries, x509.RevocationListEntry{SerialNumber: s.cert.Leaf.SerialNumber, RevocationTime: time.Now()})
	}
	data, err := ca.RevocationList(entries, big.NewInt(number), time.Now(), time.Hour)
	if err != nil {
		p.t.Fatal(err)
	}
	p.writeFile(name, data)
}

// writeFile replaces the CRL file of name's TLS directory with data.
func (p *testPKI) writeFile(name string, data []byte) {
	p.t.Helper()
	path := filepath.Join(p.dir, name, CRLFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(path+".new", data, 0o644); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		p.t.Fatal(err)
	}
}

// syncBuffer is a log destination tests read while servers write to it.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// refusedRevoked checks that err is one line saying "certificate
// revoked", of KindPermission where the error carries a Kind.
func refusedRevoked(t *testing.T, what string, err error) {
	t.Helper()
	t.Logf("%s: %v", what, err)
	switch {
	case err == nil:
		t.Errorf("%s: succeeded with a revoked certificate", what)
	case !strings.Contains(err.Error(), "certificate revoked"):
		t.Errorf("%s: %v; want it to say \"certificate revoked\"", what, err)
	case strings.Contains(err.Error(), "\n"):
		t.Errorf("%s: error of several lines: %q", what, err)
	}
}

// TestCRLRefusesRevokedClientOnEveryEndpoint revokes a client's and a
// master's certificates in a running server's CRL file: without a restart,
// gRPC, data reads, data pushes and Raft refuse them at the handshake with
// "certificate revoked", while other certificates keep working.
func TestCRLRefusesRevokedClientOnEveryEndpoint(t *testing.T) {
	pki := newTestPKI(t)
	h := newMemHandler()
	h.chunks[7] = memChunk{version: 1, data: []byte("secret")}
	srvSec := pki.security(nodeID, time.Hour)
	srv := startSecure(t, srvSec, h)
	client := pki.security(clientID, time.Hour)
	bob := pki.security(certs.Identity{Role: certs.RoleClient, Name: "bob", UID: 1001, GIDs: []uint32{1001}}, time.Hour)
	master := pki.security(masterID, time.Hour)
	if _, err := clusterInfo(client, srv.addr); err != nil {
		t.Fatalf("before revocation: %v", err)
	}

	pki.writeCRL(pki.ca, nodeID.Name, 1, client, master)

	_, err := clusterInfo(client, srv.addr)
	refusedRevoked(t, "gRPC", err)
	if chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Errorf("gRPC: kind %v, want KindPermission", chunkfs.KindOf(err))
	}
	dc := client.NewDataClient()
	defer dc.Close()
	p := make([]byte, 6)
	n, err := dc.Read(context.Background(), srv.addr, 7, 1, 0, p)
	refusedRevoked(t, "data read", err)
	if n != 0 || chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Errorf("data read: %d bytes, kind %v", n, chunkfs.KindOf(err))
	}
	refusedRevoked(t, "data push", dc.Push(context.Background(), []string{srv.addr}, 3, testData(1<<20, 2)))
	if h.get(3) != nil {
		t.Error("a revoked client's push stored data")
	}
	conn, err := master.DialRaft(srv.addr, 5*time.Second)
	if conn != nil {
		conn.Close()
	}
	refusedRevoked(t, "raft", err)

	if _, err := clusterInfo(bob, srv.addr); err != nil {
		t.Errorf("a certificate not on the list: %v", err)
	}
	if l := srvSec.CRL(); l.Len() != 2 || l.Number.Int64() != 1 {
		t.Errorf("CRL in force: %d entries, number %v", l.Len(), l.Number)
	}
}

// TestCRLClientRefusesRevokedServer checks the other side: a client whose
// CRL revokes the server's certificate refuses it before sending anything.
func TestCRLClientRefusesRevokedServer(t *testing.T) {
	pki := newTestPKI(t)
	srvSec := pki.security(nodeID, time.Hour)
	srv := startSecure(t, srvSec, newMemHandler())
	client := pki.security(clientID, time.Hour)
	pki.writeCRL(pki.ca, clientID.Name, 1, srvSec)
	_, err := clusterInfo(client, srv.addr)
	refusedRevoked(t, "gRPC", err)
	if err != nil && !strings.Contains(err.Error(), "cs1") {
		t.Errorf("the refusal does not name the server's certificate: %v", err)
	}
	dc := client.NewDataClient()
	defer dc.Close()
	_, err = dc.Read(context.Background(), srv.addr, 7, 1, 0, make([]byte, 1))
	refusedRevoked(t, "data read", err)
}

// TestCRLBadFilesKeepTheListInForce replaces a server's CRL with a list
// signed by another CA, junk, an older list and nothing: each leaves the
// list in force, logged once; a newer good list replaces it.
func TestCRLBadFilesKeepTheListInForce(t *testing.T) {
	pki := newTestPKI(t)
	client := pki.security(clientID, time.Hour)
	pki.writeCRL(pki.ca, nodeID.Name, 5, client)
	srvSec := pki.security(nodeID, time.Hour)
	var logs syncBuffer
	srvSec.SetCRLLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	srv := startSecure(t, srvSec, newMemHandler())
	other := newTestPKI(t)

	steps := []struct {
		name  string
		write func()
		log   string
	}{
		{"signed by another CA", func() { pki.writeCRL(other.ca, nodeID.Name, 9) }, "not signed by the cluster CA"},
		{"junk", func() { pki.writeFile(nodeID.Name, []byte("not a CRL\n")) }, "not a PEM CRL"},
		{"older", func() { pki.writeCRL(pki.ca, nodeID.Name, 4) }, "older than the list in force"},
		{"removed", func() { os.Remove(filepath.Join(pki.dir, nodeID.Name, CRLFile)) }, "no such file"},
	}
	for _, st := range steps {
		st.write()
		for range 2 { // a second handshake does not log the same file again
			_, err := clusterInfo(client, srv.addr)
			refusedRevoked(t, st.name, err)
		}
		if got := strings.Count(logs.String(), st.log); got != 1 {
			t.Errorf("%s: logged %d times, want once: %s", st.name, got, logs.String())
		}
		if n := srvSec.CRL().Number.Int64(); n != 5 {
			t.Errorf("%s: CRL number %d in force, want 5", st.name, n)
		}
	}
	pki.writeCRL(pki.ca, nodeID.Name, 6)
	if _, err := clusterInfo(client, srv.addr); err != nil {
		t.Errorf("after a newer list without the client: %v", err)
	}
	if !strings.Contains(logs.String(), "revocation list loaded") {
		t.Errorf("the new list was not logged: %s", logs.String())
	}
}

// TestCRLAtStartMustBeGood checks that a process does not start with a bad
// CRL, and that WatchCRL needs the file and a CA-signed list.
func TestCRLAtStartMustBeGood(t *testing.T) {
	pki := newTestPKI(t)
	pki.security(clientID, time.Hour) // makes the directory
	other := newTestPKI(t)
	pki.writeCRL(other.ca, clientID.Name, 1)
	if _, err := LoadSecurity(filepath.Join(pki.dir, clientID.Name)); err == nil || !strings.Contains(err.Error(), "not signed by the cluster CA") {
		t.Errorf("LoadSecurity with a forged CRL: %v", err)
	}
	sec := pki.security(nodeID, time.Hour)
	if err := sec.WatchCRL(filepath.Join(pki.dir, "missing.crl"), nil); err == nil {
		t.Error("WatchCRL of a missing file succeeded")
	}
	if err := Insecure().WatchCRL(filepath.Join(pki.dir, "missing.crl"), nil); err == nil {
		t.Error("WatchCRL without TLS succeeded")
	}
	if changed, err := sec.ReloadCRL(); changed || err != nil {
		t.Errorf("ReloadCRL without a CRL: %v, %v", changed, err)
	}
}

// TestCRLReloadForced checks ReloadCRL (SIGHUP): it reads the file even
// when its stat did not change, and reports a bad one.
func TestCRLReloadForced(t *testing.T) {
	pki := newTestPKI(t)
	sec := pki.security(nodeID, time.Hour)
	client := pki.security(clientID, time.Hour)
	pki.writeCRL(pki.ca, nodeID.Name, 1)
	if changed, err := sec.ReloadCRL(); !changed || err != nil {
		t.Fatalf("ReloadCRL of a new file: %v, %v", changed, err)
	}
	if changed, err := sec.ReloadCRL(); changed || err != nil {
		t.Errorf("ReloadCRL of the same list: %v, %v", changed, err)
	}
	pki.writeCRL(pki.ca, nodeID.Name, 2, client)
	if changed, err := sec.ReloadCRL(); !changed || err != nil || !sec.CRL().Revoked(client.cert.Leaf) {
		t.Errorf("ReloadCRL of a newer list: %v, %v", changed, err)
	}
	pki.writeFile(nodeID.Name, []byte("junk"))
	if _, err := sec.ReloadCRL(); err == nil {
		t.Error("ReloadCRL of junk succeeded")
	}
	if !sec.CRL().Revoked(client.cert.Leaf) {
		t.Error("junk replaced the list in force")
	}
}

// TestCRLClosesLiveConnectionsOfRevokedPeers: connections a revoked peer
// opened before the revocation are closed as soon as the new list is in
// force — found by the next handshake of anyone, or by ReloadCRL (SIGHUP)
// — while other peers' connections stay.
func TestCRLClosesLiveConnectionsOfRevokedPeers(t *testing.T) {
	pki := newTestPKI(t)
	h := newMemHandler()
	h.chunks[7] = memChunk{version: 1, data: []byte("secret")}
	srvSec := pki.security(nodeID, time.Hour)
	srv := startSecure(t, srvSec, h)
	alice := pki.security(clientID, time.Hour)
	bob := pki.security(certs.Identity{Role: certs.RoleClient, Name: "bob", UID: 1001, GIDs: []uint32{1001}}, time.Hour)
	master := pki.security(masterID, time.Hour)

	info := func(cc *grpc.ClientConn) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := pb.NewMasterClient(cc).ClusterInfo(ctx, &pb.ClusterInfoRequest{})
		return Err(err)
	}
	aliceCC, err := alice.Dial(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer aliceCC.Close()
	bobCC, err := bob.Dial(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer bobCC.Close()
	for who, cc := range map[string]*grpc.ClientConn{"alice": aliceCC, "bob": bobCC} {
		if err := info(cc); err != nil {
			t.Fatalf("%s before revocation: %v", who, err)
		}
	}
	raftConn, err := master.DialRaft(srv.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raftConn.Close()
	accepted, err := srv.raft.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()

	// Alice is revoked; bob's next handshake finds the new file.
	pki.writeCRL(pki.ca, nodeID.Name, 1, alice)
	if _, err := clusterInfo(bob, srv.addr); err != nil {
		t.Fatalf("bob's new connection: %v", err)
	}
	// Alice's call fails: on the closed connection if her client has not
	// seen it close yet, then at the handshake of a new one.
	if err := info(aliceCC); err == nil {
		t.Error("alice's connection from before still serves her")
	}
	refusedRevoked(t, "alice's connection from before", info(aliceCC))
	if err := info(bobCC); err != nil {
		t.Errorf("bob's connection from before: %v", err)
	}

	// The master is revoked; SIGHUP (ReloadCRL) closes its Raft link.
	pki.writeCRL(pki.ca, nodeID.Name, 2, alice, master)
	if changed, err := srvSec.ReloadCRL(); !changed || err != nil {
		t.Fatalf("ReloadCRL: %v, %v", changed, err)
	}
	raftConn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := raftConn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("the revoked master's Raft connection stayed open: %v", err)
	}
	if err := info(bobCC); err != nil {
		t.Errorf("bob's connection after the second list: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
