package rpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/certs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// testPKI is a cluster CA whose certificates tests issue into a temporary
// directory.
type testPKI struct {
	t   testing.TB
	ca  *certs.CA
	dir string
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	ca, err := certs.NewCA("test CA", time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{t: t, ca: ca, dir: t.TempDir()}
}

// security issues a certificate for id, valid from now for validity
// (negative: already expired), and loads it.
func (p *testPKI) security(id certs.Identity, validity time.Duration) *Security {
	p.t.Helper()
	dir := filepath.Join(p.dir, id.Name)
	now := time.Now()
	if validity < 0 {
		now = now.Add(2 * validity)
		validity = -validity
	}
	if err := p.ca.IssueDir(dir, id, []string{"127.0.0.1", "localhost"}, now, validity); err != nil {
		p.t.Fatal(err)
	}
	sec, err := LoadSecurity(dir)
	if err != nil {
		p.t.Fatal(err)
	}
	return sec
}

var (
	nodeID   = certs.Identity{Role: certs.RoleChunkserver, Name: "cs1"}
	masterID = certs.Identity{Role: certs.RoleMaster, Name: "m1"}
	clientID = certs.Identity{Role: certs.RoleClient, Name: "alice", UID: 1000, GIDs: []uint32{1000, 27}}
)

// identityMaster answers ClusterInfo with the caller's certificate
// identity in Leader ("" when it has none).
type identityMaster struct {
	pb.UnimplementedMasterServer
}

func (identityMaster) ClusterInfo(ctx context.Context, _ *pb.ClusterInfoRequest) (*pb.ClusterInfoResponse, error) {
	id, ok := PeerIdentity(ctx)
	if !ok {
		return &pb.ClusterInfoResponse{}, nil
	}
	return &pb.ClusterInfoResponse{Leader: id.URI().String()}, nil
}

// secureServer is a Mux secured by sec serving a gRPC master, the data
// stream of h and a Raft listener.
type secureServer struct {
	addr string
	raft net.Listener
}

func startSecure(t testing.TB, sec *Security, h StreamHandler) *secureServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	cfg := DefaultStreamConfig()
	cfg.Logger, cfg.Client = log, sec.NewDataClient()
	srv, err := NewStreamServer(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := sec.NewMux(lis, log)
	gs := sec.NewServer(log)
	pb.RegisterMasterServer(gs, identityMaster{})
	raft := mux.Raft()
	go mux.Serve()
	go srv.Serve(mux.Data())
	go gs.Serve(mux.GRPC())
	t.Cleanup(func() {
		mux.Close()
		gs.Stop()
		srv.Close()
		cfg.Client.Close()
	})
	return &secureServer{addr: lis.Addr().String(), raft: raft}
}

func clusterInfo(sec *Security, addr string) (*pb.ClusterInfoResponse, error) {
	cc, err := sec.Dial(addr)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return pb.NewMasterClient(cc).ClusterInfo(ctx, &pb.ClusterInfoRequest{})
}

func TestTLSEverythingWorksWithTrustedCertificates(t *testing.T) {
	pki := newTestPKI(t)
	h := newMemHandler()
	data := testData(3*chunkfs.BlockSize+100, 1)
	h.chunks[7] = memChunk{version: 1, data: data}
	srv := startSecure(t, pki.security(nodeID, time.Hour), h)
	sec := pki.security(clientID, time.Hour)

	resp, err := clusterInfo(sec, srv.addr)
	if err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	if want := clientID.URI().String(); resp.Leader != want {
		t.Errorf("PeerIdentity in the handler = %q, want %q", resp.Leader, want)
	}

	dc := sec.NewDataClient()
	defer dc.Close()
	ctx := context.Background()
	if err := dc.Push(ctx, []string{srv.addr, srv.addr}, 9, data); err != nil {
		t.Fatalf("push along a TLS chain: %v", err)
	}
	if !bytes.Equal(h.get(9), data) {
		t.Error("pushed data differs")
	}
	got := make([]byte, len(data))
	if n, err := dc.Read(ctx, srv.addr, 7, 1, 0, got); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("read over TLS: n=%d err=%v", n, err)
	}
}

func TestTLSConnIdentityOnDataAndRaft(t *testing.T) {
	pki := newTestPKI(t)
	srv := startSecure(t, pki.security(nodeID, time.Hour), newMemHandler())
	sec := pki.security(clientID, time.Hour)

	var wg sync.WaitGroup
	wg.Add(1)
	var got certs.Identity
	var ok bool
	var msg []byte
	go func() {
		defer wg.Done()
		c, err := srv.raft.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		got, ok = ConnIdentity(c)
		msg = make([]byte, 5)
		io.ReadFull(c, msg)
	}()
	conn, err := pki.security(masterID, time.Hour).DialRaft(srv.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("DialRaft over TLS: %v", err)
	}
	io.WriteString(conn, "hello")
	wg.Wait()
	conn.Close()
	if !ok || got.Name != masterID.Name || got.Role != certs.RoleMaster {
		t.Errorf("ConnIdentity of a Raft connection = %+v, %v; want %+v", got, ok, masterID)
	}

	// Only masters speak Raft: a client's certificate, trusted as it is,
	// is turned away.
	conn, err = sec.DialRaft(srv.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("a client's Raft connection was kept open")
	}
	if string(msg) != "hello" {
		t.Errorf("Raft connection carried %q", msg)
	}
}

func TestTLSConnIdentityThroughMuxPrefix(t *testing.T) {
	pki := newTestPKI(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := pki.security(nodeID, time.Hour).NewMux(lis, slog.New(slog.DiscardHandler))
	go mux.Serve()
	defer mux.Close()
	dc := pki.security(clientID, time.Hour).NewDataClient()
	defer dc.Close()
	go dc.Read(context.Background(), lis.Addr().String(), 1, 1, 0, make([]byte, 1))
	c, err := mux.Data().Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if id, ok := ConnIdentity(c); !ok || id.Name != clientID.Name {
		t.Errorf("ConnIdentity of a data connection = %+v, %v", id, ok)
	}
}

// TestTLSRefusesUntrusted checks that without a trusted certificate a
// client reaches nothing: gRPC, the data stream (read and push) and Raft
// each fail at once with one clear line.
func TestTLSRefusesUntrusted(t *testing.T) {
	pki := newTestPKI(t)
	h := newMemHandler()
	h.chunks[7] = memChunk{version: 1, data: []byte("secret")}
	srv := startSecure(t, pki.security(nodeID, time.Hour), h)
	other := newTestPKI(t)
	cases := []struct {
		name string
		sec  *Security
		want string
	}{
		{"no certificate", Insecure(), "server requires TLS"},
		{"another CA", other.security(clientID, time.Hour), "certificate not trusted"},
		{"expired", pki.security(certs.Identity{Role: certs.RoleClient, Name: "old", UID: 5, GIDs: []uint32{5}}, -time.Hour), "certificate not trusted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			check := func(what string, err error) {
				t.Helper()
				t.Logf("%s: %v", what, err)
				switch {
				case err == nil:
					t.Errorf("%s: succeeded without a trusted certificate", what)
				case !strings.Contains(err.Error(), tc.want):
					t.Errorf("%s: %v; want it to say %q", what, err, tc.want)
				case strings.Contains(err.Error(), "\n"):
					t.Errorf("%s: error of several lines: %q", what, err)
				}
			}
			resp, err := clusterInfo(tc.sec, srv.addr)
			if err == nil {
				t.Logf("answered %+v", resp)
			}
			check("gRPC", err)
			if chunkfs.KindOf(err) != chunkfs.KindPermission {
				t.Errorf("gRPC: kind %v, want KindPermission", chunkfs.KindOf(err))
			}
			dc := tc.sec.NewDataClient()
			defer dc.Close()
			p := make([]byte, 6)
			n, err := dc.Read(context.Background(), srv.addr, 7, 1, 0, p)
			check("data read", err)
			if n != 0 {
				t.Errorf("data read returned %d bytes", n)
			}
			if chunkfs.KindOf(err) != chunkfs.KindPermission {
				t.Errorf("data read: kind %v, want KindPermission", chunkfs.KindOf(err))
			}
			check("data push", dc.Push(context.Background(), []string{srv.addr}, 3, testData(1<<20, 2)))
			if h.get(3) != nil {
				t.Error("push stored data")
			}
			if !tc.sec.IsInsecure() {
				conn, err := tc.sec.DialRaft(srv.addr, 5*time.Second)
				if conn != nil {
					conn.Close()
				}
				check("raft", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("refusals took %v", d)
			}
		})
	}
}

// TestTLSClientOfPlainServer checks that a TLS client of a plain-TCP
// server fails with a clear line, not a hang.
func TestTLSClientOfPlainServer(t *testing.T) {
	pki := newTestPKI(t)
	addr, _ := startStream(t, newMemHandler())
	sec := pki.security(clientID, time.Hour)
	dc := sec.NewDataClient()
	defer dc.Close()
	_, err := dc.Read(context.Background(), addr, 1, 1, 0, make([]byte, 1))
	if err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("data read of a plain server: %v", err)
	}
	cc, err := sec.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pb.NewChunkServerClient(cc).ChunkInfo(ctx, &pb.ChunkInfoRequest{})
	if err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("gRPC to a plain server: %v", err)
	}
}

// TestTLSSessionsResume: a process's second connection to a server
// resumes the first one's TLS session (no certificate signatures, no
// chain verification); the server still knows the peer's identity from
// it, and a certificate revoked since, the client's or the server's, is
// refused on a resumed session as on a full handshake.
func TestTLSSessionsResume(t *testing.T) {
	pki := newTestPKI(t)
	srvSec := pki.security(nodeID, time.Hour)
	srv := startSecure(t, srvSec, newMemHandler())
	master := pki.security(masterID, time.Hour)
	accepted := make(chan certs.Identity, 4)
	go func() {
		for {
			c, err := srv.raft.Accept()
			if err != nil {
				return
			}
			id, _ := ConnIdentity(c)
			accepted <- id
			c.Close()
		}
	}()
	dial := func(sec *Security) (*tls.Conn, error) {
		conn, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tc, err := sec.clientTLS(ctx, conn, srv.addr)
		if err == nil {
			t.Cleanup(func() { tc.Close() })
		}
		return tc, err
	}
	for i, want := range []bool{false, true, true} {
		tc, err := dial(master)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if got := tc.ConnectionState().DidResume; got != want {
			t.Fatalf("connection %d resumed a session: %v, want %v", i, got, want)
		}
		if err := writeMagic(tc, RaftMagic, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-accepted:
			if id.Name != masterID.Name || id.Role != certs.RoleMaster {
				t.Fatalf("connection %d: the server saw %+v, want %+v", i, id, masterID)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("connection %d: not accepted", i)
		}
	}

	// The server's list revokes the master's certificate: its session,
	// still in the master's cache, is refused.
	pki.writeCRL(pki.ca, nodeID.Name, 1, master)
	_, err := dial(master)
	refusedRevoked(t, "resumed session of a revoked client", err)

	// A client whose own list revokes the server's certificate refuses a
	// session resumed with it.
	alice := pki.security(clientID, time.Hour)
	if _, err := dial(alice); err != nil {
		t.Fatal(err)
	}
	if tc, err := dial(alice); err != nil || !tc.ConnectionState().DidResume {
		t.Fatalf("alice's second connection: %v (resumed: %v)", err, err == nil && tc.ConnectionState().DidResume)
	}
	pki.writeCRL(pki.ca, clientID.Name, 1, srvSec)
	_, err = dial(alice)
	refusedRevoked(t, "resumed session with a revoked server", err)
}
