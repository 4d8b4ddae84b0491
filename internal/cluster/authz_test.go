package cluster

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/certs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// userClient issues the cluster's CA a certificate for id and returns a
// client presenting it that claims caller.
func userClient(t *testing.T, ctx context.Context, c *Cluster, id certs.Identity, caller chunkfs.Caller) *client.Client {
	t.Helper()
	sec, err := c.IssueCertificate(id)
	if err != nil {
		t.Fatal(err)
	}
	cfg := client.DefaultConfig()
	cfg.Master, cfg.Caller, cfg.Security = c.MasterAddr(), caller, sec
	cfg.RetryTimeout = 5 * time.Second
	cl, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

var (
	aliceCaller = chunkfs.Caller{UID: 1000, GIDs: []uint32{1000}}
	bobCaller   = chunkfs.Caller{UID: 1001, GIDs: []uint32{1001}}
	aliceCert   = certs.Identity{Role: certs.RoleClient, Name: "alice", UID: 1000, GIDs: []uint32{1000}}
	bobCert     = certs.Identity{Role: certs.RoleClient, Name: "bob", UID: 1001, GIDs: []uint32{1001}}
)

// TestTLSUsersActAsTheirCertificates: on a TLS cluster each user acts as
// its certificate. Bob, with his own certificate, cannot read, list, write
// or delete alice's 0600 file or 0700 directory, and cannot claim to be
// alice or root; a proxy mount's certificate acts for alice; a user
// certificate makes no node or admin call.
func TestTLSUsersActAsTheirCertificates(t *testing.T) {
	c, root, ctx := startTLS(t, nil)
	if err := root.Mkdir(ctx, "/home", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := root.Mkdir(ctx, "/home/alice", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := root.Chown(ctx, "/home/alice", 1000, 1000); err != nil {
		t.Fatal(err)
	}
	alice := userClient(t, ctx, c, aliceCert, aliceCaller)
	secret := []byte("alice's secret")
	put(t, ctx, alice, "/home/alice/secret", secret)
	if err := alice.Chmod(ctx, "/home/alice/secret", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := alice.Mkdir(ctx, "/home/alice/private", 0o700); err != nil {
		t.Fatal(err)
	}
	put(t, ctx, alice, "/home/alice/private/f", secret)
	if fi, err := alice.Stat(ctx, "/home/alice/secret"); err != nil || fi.UID != 1000 || fi.GID != 1000 {
		t.Fatalf("alice's file: %+v, %v", fi, err)
	}

	bob := userClient(t, ctx, c, bobCert, bobCaller)
	bobAsAlice := userClient(t, ctx, c, bobCert, aliceCaller)
	bobAsRoot := userClient(t, ctx, c, bobCert, chunkfs.Root)
	for name, cl := range map[string]*client.Client{"bob": bob, "bob claiming alice": bobAsAlice, "bob claiming root": bobAsRoot} {
		for _, tc := range []struct {
			what string
			err  error
		}{
			{"read the 0600 file", readErr(ctx, cl, "/home/alice/secret")},
			{"read below the 0700 dir", readErr(ctx, cl, "/home/alice/private/f")},
			{"stat below the 0700 dir", statErr(ctx, cl, "/home/alice/private/f")},
			{"list the 0700 dir", listErr(ctx, cl, "/home/alice/private")},
			{"write the 0600 file", writeErr(ctx, cl, "/home/alice/secret")},
			{"create in the 0700 dir", createErr(ctx, cl, "/home/alice/private/g")},
			{"delete the 0600 file", cl.Remove(ctx, "/home/alice/secret")},
			{"delete the 0700 dir", cl.RemoveAll(ctx, "/home/alice/private")},
			{"chmod the 0600 file", cl.Chmod(ctx, "/home/alice/secret", 0o666)},
		} {
			if !errors.Is(tc.err, fs.ErrPermission) {
				t.Errorf("%s: %s: %v, want permission denied", name, tc.what, tc.err)
			}
		}
	}
	// A forged claim is refused as such, in one line, even where the
	// claimed user could act.
	err := statErr(ctx, bobAsAlice, "/home/alice/secret")
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "cannot act as uid 1000") || strings.Contains(err.Error(), "\n") {
		t.Errorf("bob claiming alice stats: %v", err)
	}
	// Alice's data is intact, and reachable through a proxy mount acting
	// for her.
	gw := userClient(t, ctx, c, certs.Identity{Role: certs.RoleMount, Name: "gw", UID: 0, GIDs: []uint32{0}, Proxy: true}, aliceCaller)
	for name, cl := range map[string]*client.Client{"alice": alice, "a proxy mount for alice": gw} {
		if got, err := get(ctx, cl, "/home/alice/private/f"); err != nil || !bytes.Equal(got, secret) {
			t.Errorf("%s reads: %q, %v", name, got, err)
		}
	}
	// A mount without the proxy privilege is only its own user.
	laptop := userClient(t, ctx, c, certs.Identity{Role: certs.RoleMount, Name: "laptop", UID: 1001, GIDs: []uint32{1001}}, aliceCaller)
	if err := readErr(ctx, laptop, "/home/alice/secret"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("a mount without proxy claiming alice: %v", err)
	}

	// A writer who is not the owner may touch a file (times to now), not
	// set times of its choosing.
	put(t, ctx, alice, "/home/alice/shared", secret)
	if err := alice.Chmod(ctx, "/home/alice/shared", 0o664); err != nil {
		t.Fatal(err)
	}
	carol := userClient(t, ctx, c, certs.Identity{Role: certs.RoleClient, Name: "carol", UID: 1002, GIDs: []uint32{1002, 1000}}, chunkfs.Caller{UID: 1002, GIDs: []uint32{1002, 1000}})
	if err := carol.Touch(ctx, "/home/alice/shared"); err != nil {
		t.Errorf("a writer touches: %v", err)
	}
	if err := carol.Chtimes(ctx, "/home/alice/shared", time.Unix(1, 0), time.Unix(1, 0)); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("a writer sets chosen times: %v, want permission denied", err)
	}

	// Straight to the master with bob's certificate: no chunk locations of
	// alice's file, no registering as a chunkserver, no admin calls.
	sec, err := c.IssueCertificate(certs.Identity{Role: certs.RoleClient, Name: "bob2", UID: 1001, GIDs: []uint32{1001}})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := sec.Dial(c.MasterAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	mc := pb.NewMasterClient(cc)
	bobPB := &pb.Caller{Uid: 1001, Gids: []uint32{1001}}
	for what, call := range map[string]func() error{
		"get chunks": func() error {
			_, err := mc.GetChunks(ctx, &pb.GetChunksRequest{Caller: bobPB, Path: "/home/alice/secret"})
			return err
		},
		"register": func() error {
			_, err := mc.Register(ctx, &pb.RegisterRequest{Id: "evil", Addr: "127.0.0.1:1"})
			return err
		},
		"heartbeat": func() error { _, err := mc.Heartbeat(ctx, &pb.HeartbeatRequest{Id: "evil"}); return err },
		"ha change": func() error {
			_, err := mc.HAChange(ctx, &pb.HAChangeRequest{Caller: bobPB, Op: "remove", Id: "x"})
			return err
		},
		"balance": func() error {
			_, err := mc.Balance(ctx, &pb.BalanceRequest{Caller: bobPB, Action: "start"})
			return err
		},
		"decommission": func() error {
			_, err := mc.Decommission(ctx, &pb.DecommissionRequest{Caller: bobPB, Server: "cs0"})
			return err
		},
		"safemode leave": func() error {
			_, err := mc.SafeMode(ctx, &pb.SafeModeRequest{Caller: bobPB, Action: "leave"})
			return err
		},
	} {
		if err := call(); chunkfs.KindOf(err) != chunkfs.KindPermission {
			t.Errorf("bob's %s: %v, want permission denied", what, err)
		}
	}
}

func readErr(ctx context.Context, cl *client.Client, p string) error {
	_, err := get(ctx, cl, p)
	return err
}

func statErr(ctx context.Context, cl *client.Client, p string) error {
	_, err := cl.Stat(ctx, p)
	return err
}

func listErr(ctx context.Context, cl *client.Client, p string) error {
	_, err := cl.ReadDir(ctx, p)
	return err
}

func writeErr(ctx context.Context, cl *client.Client, p string) error {
	f, err := cl.OpenFile(ctx, p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte("bob was here")); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func createErr(ctx context.Context, cl *client.Client, p string) error {
	f, err := cl.Create(ctx, p)
	if err != nil {
		return err
	}
	return f.Close()
}
