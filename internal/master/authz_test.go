package master

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/certs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Identities of the authorisation table.
var (
	aliceID  = certs.Identity{Role: certs.RoleClient, Name: "alice", UID: 1000, GIDs: []uint32{100, 102}}
	adminID  = certs.Identity{Role: certs.RoleClient, Name: "admin", UID: 1005, GIDs: []uint32{1005, 7}}
	rootID   = certs.Identity{Role: certs.RoleClient, Name: "root", UID: 0, GIDs: []uint32{0}}
	proxyID  = certs.Identity{Role: certs.RoleMount, Name: "gw", UID: 1002, GIDs: []uint32{1002}, Proxy: true}
	mountID  = certs.Identity{Role: certs.RoleMount, Name: "laptop", UID: 1000, GIDs: []uint32{100}}
	serverID = certs.Identity{Role: certs.RoleChunkserver, Name: "cs1"}
	masterID = certs.Identity{Role: certs.RoleMaster, Name: "m2"}
)

// TestAuthorize is the table of who may act as whom.
func TestAuthorize(t *testing.T) {
	secure := policy{requireIdentity: true, superGroup: 7}
	plain := policy{superGroup: 7}
	claim := func(uid uint32, gids ...uint32) *chunkfs.Caller { return &chunkfs.Caller{UID: uid, GIDs: gids} }
	id := func(i certs.Identity) *certs.Identity { return &i }
	for _, tc := range []struct {
		name    string
		p       policy
		id      *certs.Identity
		method  string
		claimed *chunkfs.Caller
		want    *chunkfs.Caller // nil: refused (permission denied)
	}{
		{"client acts as itself", secure, id(aliceID), "Create", claim(1000, 100), claim(1000, 100, 102)},
		{"client claiming nothing", secure, id(aliceID), "Stat", nil, claim(1000, 100, 102)},
		{"client claiming its other group", secure, id(aliceID), "Stat", claim(1000, 102), claim(1000, 100, 102)},
		{"client claiming another uid", secure, id(aliceID), "Stat", claim(1001, 100), nil},
		{"client claiming root", secure, id(aliceID), "Delete", claim(0, 0), nil},
		{"client claiming a group it lacks", secure, id(aliceID), "Stat", claim(1000, 100, 0), nil},
		{"client of the superuser group", secure, id(adminID), "Stat", nil, &chunkfs.Caller{UID: 1005, GIDs: []uint32{1005, 7}, Super: true}},
		{"client of uid 0", secure, id(rootID), "Stat", claim(0, 0), &chunkfs.Caller{UID: 0, GIDs: []uint32{0}, Super: true}},
		{"proxy mount acts for its user", secure, id(proxyID), "Create", claim(1001, 101), claim(1001, 101)},
		{"proxy mount links for its user", secure, id(proxyID), "Link", claim(1001, 101), claim(1001, 101)},
		{"client links as itself", secure, id(aliceID), "Link", claim(1000, 100), claim(1000, 100, 102)},
		{"proxy mount acts for root", secure, id(proxyID), "Stat", claim(0, 0), &chunkfs.Caller{UID: 0, GIDs: []uint32{0}, Super: true}},
		{"proxy mount claiming nothing", secure, id(proxyID), "Stat", nil, claim(1002, 1002)},
		{"mount without proxy is a client", secure, id(mountID), "Stat", claim(1001, 101), nil},
		{"mount without proxy as itself", secure, id(mountID), "Stat", claim(1000, 100), claim(1000, 100)},
		{"no certificate on a secure master", secure, nil, "Stat", claim(1000, 100), nil},
		{"no certificate, node call", secure, nil, "Heartbeat", nil, nil},
		{"plain TCP trusts the claim", plain, nil, "Stat", claim(1001, 101), claim(1001, 101)},
		{"plain TCP claiming nothing", plain, nil, "Stat", nil, &nobody},
		{"plain TCP claiming the group", plain, nil, "Stat", claim(1001, 7), &chunkfs.Caller{UID: 1001, GIDs: []uint32{7}, Super: true}},
		{"plain TCP admin call as a user", plain, nil, "Balance", claim(1001, 101), nil},
		{"plain TCP admin call as root", plain, nil, "HAChange", claim(0, 0), &chunkfs.Caller{UID: 0, GIDs: []uint32{0}, Super: true}},
		{"plain TCP admin call as the group", plain, nil, "Balance", claim(1001, 7), &chunkfs.Caller{UID: 1001, GIDs: []uint32{7}, Super: true}},
		{"chunkserver registers", secure, id(serverID), "Register", nil, &nobody},
		{"chunkserver heartbeats", secure, id(serverID), "Heartbeat", nil, &nobody},
		{"chunkserver reports corruption", secure, id(serverID), "ReportCorrupt", nil, &nobody},
		{"chunkserver reads the namespace", secure, id(serverID), "Stat", claim(0, 0), nil},
		{"chunkserver changes the masters", secure, id(serverID), "HAChange", claim(0, 0), nil},
		{"master joins the group", secure, id(masterID), "HAChange", claim(0, 0), &nobody},
		{"master registers as a chunkserver", secure, id(masterID), "Register", nil, nil},
		{"master writes a file", secure, id(masterID), "Create", claim(0, 0), nil},
		{"master's status page lists, as nobody", secure, id(masterID), "List", claim(0, 0), &nobody},
		{"master's status page reads the report", secure, id(masterID), "ClusterReport", nil, &nobody},
		{"client registers", secure, id(aliceID), "Register", nil, nil},
		{"client heartbeats", secure, id(rootID), "Heartbeat", nil, nil},
		{"client reports corruption", secure, id(aliceID), "ReportCorrupt", nil, claim(1000, 100, 102)},
		{"client changes the masters", secure, id(aliceID), "HAChange", nil, nil},
		{"client balances", secure, id(aliceID), "Balance", nil, nil},
		{"client decommissions", secure, id(aliceID), "Decommission", claim(1000, 100), nil},
		{"superuser group balances", secure, id(adminID), "Balance", nil, &chunkfs.Caller{UID: 1005, GIDs: []uint32{1005, 7}, Super: true}},
		{"uid 0 decommissions", secure, id(rootID), "Decommission", nil, &chunkfs.Caller{UID: 0, GIDs: []uint32{0}, Super: true}},
		{"proxy acting as a user balances", secure, id(proxyID), "Balance", claim(1001, 101), nil},
		{"client reads the report", secure, id(aliceID), "ClusterReport", nil, claim(1000, 100, 102)},
		{"client runs fsck", secure, id(aliceID), "Fsck", nil, claim(1000, 100, 102)},
		{"unknown call", secure, id(rootID), "Format", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := authorize(tc.p, tc.id, tc.method, tc.claimed)
			if tc.want == nil {
				if chunkfs.KindOf(err) != chunkfs.KindPermission {
					t.Fatalf("err %v (caller %+v), want permission denied", err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.UID != tc.want.UID || !slices.Equal(got.GIDs, tc.want.GIDs) || got.Super != tc.want.Super {
				t.Fatalf("acts as %+v, want %+v", got, *tc.want)
			}
		})
	}
}

// TestEveryCallListed: every Master call has an entry in the table (a
// call left out would be refused to every certificate).
func TestEveryCallListed(t *testing.T) {
	for _, md := range pb.Master_ServiceDesc.Methods {
		if _, ok := methods[md.MethodName]; !ok {
			t.Errorf("%s has no entry in methods", md.MethodName)
		}
	}
}

// TestRefusalIsOneLine: a refused claim says "permission denied" and who
// may not act as whom, on one line.
func TestRefusalIsOneLine(t *testing.T) {
	_, err := authorize(policy{requireIdentity: true}, &aliceID, "Stat", &chunkfs.Caller{UID: 0, GIDs: []uint32{0}})
	want := "Stat: permission denied: certificate of uid 1000 cannot act as uid 0"
	if err == nil || err.Error() != want {
		t.Fatalf("err %q, want %q", err, want)
	}
}

// secureMaster is a master that requires certificate identities, opened
// (not served): tests call its guard and handlers with peer contexts.
type secureMaster struct {
	m  *Master
	ca *certs.CA
}

func openSecure(t *testing.T) *secureMaster {
	t.Helper()
	now := time.Now()
	ca, err := certs.NewCA("test", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPEM, keyPEM, err := ca.Issue(certs.Identity{Role: certs.RoleMaster, Name: "127.0.0.1"}, []string{"127.0.0.1"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{rpc.CAFile: certs.EncodeCert(ca.Cert.Raw), rpc.CertFile: certPEM, rpc.KeyFile: keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sec, err := rpc.LoadSecurity(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, t.TempDir(), clock.NewFake(time.Unix(1_700_000_000, 0)))
	cfg.Security, cfg.SuperuserGroup = sec, 7
	m, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Check(); err != nil {
			t.Error(err)
		}
		m.Close()
	})
	return &secureMaster{m: m, ca: ca}
}

// as returns a context whose peer presented a certificate of id, verified
// by the cluster's CA, as gRPC's TLS credentials report it.
func (s *secureMaster) as(t *testing.T, id certs.Identity) context.Context {
	t.Helper()
	certPEM, _, err := s.ca.Issue(id, nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	st := tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf, s.ca.Cert}}}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: st}})
}

// call runs a Master call as the server does: the guard, then the handler.
func call[Req, Resp any](ctx context.Context, m *Master, method string, h func(context.Context, Req) (Resp, error), req Req) (Resp, error) {
	if err := m.authGuard(ctx, "/chunkfs.v1.Master/"+method, req); err != nil {
		var zero Resp
		return zero, err
	}
	return h(ctx, req)
}

// TestCertificateIdentity drives a secure master's handlers: a user acts
// as its certificate, cannot claim another UID, and meets the namespace's
// checks as that user; nodes and plain connections are refused.
func TestCertificateIdentity(t *testing.T) {
	s := openSecure(t)
	m := s.m
	rootCtx := s.as(t, rootID)
	aliceCtx := s.as(t, aliceID)
	bobCtx := s.as(t, certs.Identity{Role: certs.RoleClient, Name: "bob", UID: 1001, GIDs: []uint32{101}})
	proxyCtx := s.as(t, proxyID)
	serverCtx := s.as(t, serverID)
	mode := uint32(0o777)
	if _, err := call(rootCtx, m, "SetAttr", m.Server().SetAttr, &pb.SetAttrRequest{Path: "/", Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	// Alice makes a private directory and file, claiming nothing.
	if _, err := call(aliceCtx, m, "Mkdir", m.Server().Mkdir, &pb.MkdirRequest{Path: "/a", Mode: 0o700}); err != nil {
		t.Fatal(err)
	}
	r, err := call(aliceCtx, m, "Create", m.Server().Create, &pb.CreateRequest{Path: "/a/f", Mode: 0o600})
	if err != nil {
		t.Fatal(err)
	}
	if r.Info.Uid != 1000 || r.Info.Gid != 100 {
		t.Fatalf("alice's file is %d:%d", r.Info.Uid, r.Info.Gid)
	}
	denied := func(what string, err error) {
		t.Helper()
		if kindOf(err) != chunkfs.KindPermission {
			t.Errorf("%s: err %v, want permission denied", what, err)
		}
	}
	// Bob, as himself, can do nothing there; claiming alice is refused.
	_, err = call(bobCtx, m, "Stat", m.Server().Stat, &pb.StatRequest{Path: "/a/f"})
	denied("bob stats", err)
	_, err = call(bobCtx, m, "List", m.Server().List, &pb.ListRequest{Path: "/a"})
	denied("bob lists", err)
	_, err = call(bobCtx, m, "GetChunks", m.Server().GetChunks, &pb.GetChunksRequest{Path: "/a/f"})
	denied("bob reads", err)
	_, err = call(bobCtx, m, "Delete", m.Server().Delete, &pb.DeleteRequest{Path: "/a", Recursive: true})
	denied("bob deletes", err)
	_, err = call(bobCtx, m, "Stat", m.Server().Stat, &pb.StatRequest{Caller: alice, Path: "/a/f"})
	denied("bob claims alice", err)
	_, err = call(bobCtx, m, "Stat", m.Server().Stat, &pb.StatRequest{Caller: root, Path: "/a/f"})
	denied("bob claims root", err)
	// In a batch, the forged claim fails alone.
	br, err := call(bobCtx, m, "Batch", m.Server().Batch, &pb.BatchRequest{Ops: []*pb.MetaOp{
		{Op: &pb.MetaOp_Stat{Stat: &pb.StatRequest{Caller: alice, Path: "/a/f"}}},
		{Op: &pb.MetaOp_Create{Create: &pb.CreateRequest{Caller: alice, Path: "/a/g"}}},
		{Op: &pb.MetaOp_Stat{Stat: &pb.StatRequest{Path: "/"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, false, true} {
		if ok := br.Results[i].GetError() == nil; ok != want {
			t.Errorf("batch op %d: %v", i, br.Results[i])
		}
	}
	// A proxy mount acts for alice; a node certificate reaches no file.
	if _, err := call(proxyCtx, m, "Stat", m.Server().Stat, &pb.StatRequest{Caller: alice, Path: "/a/f"}); err != nil {
		t.Errorf("proxy for alice: %v", err)
	}
	_, err = call(serverCtx, m, "Stat", m.Server().Stat, &pb.StatRequest{Caller: root, Path: "/a/f"})
	denied("a chunkserver stats", err)
	_, err = call(aliceCtx, m, "Heartbeat", m.Server().Heartbeat, &pb.HeartbeatRequest{Id: "x"})
	denied("alice heartbeats", err)
	_, err = call(context.Background(), m, "Stat", m.Server().Stat, &pb.StatRequest{Caller: root, Path: "/"})
	denied("no certificate", err)
	// Handlers decide the caller themselves too, guard or not.
	_, err = m.Server().Stat(bobCtx, &pb.StatRequest{Caller: alice, Path: "/a/f"})
	denied("bob claims alice past the guard", err)
	// The superuser group reads everything; admin calls need it.
	if _, err := call(s.as(t, adminID), m, "Stat", m.Server().Stat, &pb.StatRequest{Path: "/a/f"}); err != nil {
		t.Errorf("superuser group: %v", err)
	}
	_, err = call(aliceCtx, m, "HAChange", m.Server().HAChange, &pb.HAChangeRequest{Caller: alice, Op: "remove", Id: "m2"})
	denied("alice changes the masters", err)
	_, err = call(s.as(t, adminID), m, "HAChange", m.Server().HAChange, &pb.HAChangeRequest{Op: "remove", Id: "m2"})
	if kindOf(err) != chunkfs.KindNotSupported {
		t.Errorf("superuser changes a lone master's group: %v, want not supported", err)
	}
}

// TestTimesNow: a writer that does not own a file may set its times to
// now (times_now, the master's clock) but not to times of its choosing.
func TestTimesNow(t *testing.T) {
	tm := startMaster(t, "", nil)
	carol := &pb.Caller{Uid: 1002, Gids: []uint32{100}}
	if _, err := tm.c.Create(bg, &pb.CreateRequest{Caller: alice, Path: "/g", Mode: 0o664}); err != nil {
		t.Fatal(err)
	}
	when := int64(42)
	_, err := tm.c.SetAttr(bg, &pb.SetAttrRequest{Caller: carol, Path: "/g", MtimeNs: &when})
	if kindOf(err) != chunkfs.KindPermission {
		t.Fatalf("chosen times by a writer: %v, want permission denied", err)
	}
	r, err := tm.c.SetAttr(bg, &pb.SetAttrRequest{Caller: carol, Path: "/g", AtimeNs: &when, MtimeNs: &when, TimesNow: true})
	if err != nil {
		t.Fatal(err)
	}
	if now := tm.clock.Now().UnixNano(); r.Info.MtimeNs != now || r.Info.AtimeNs != now {
		t.Errorf("times now: mtime %d atime %d, want the master's %d", r.Info.MtimeNs, r.Info.AtimeNs, now)
	}
	_, err = tm.c.SetAttr(bg, &pb.SetAttrRequest{Caller: bob, Path: "/g", MtimeNs: &when, TimesNow: true})
	if kindOf(err) != chunkfs.KindPermission {
		t.Fatalf("times now by a reader: %v, want permission denied", err)
	}
}
