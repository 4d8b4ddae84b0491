package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/certs"
	"github.com/chunkfs/chunkfs/internal/cluster"
)

// TestTLSCLIUsers runs the binary against an in-process TLS cluster with
// users' certificates: each command acts as its certificate's user (the
// process runs as root), so bob cannot read, list, overwrite or delete
// alice's 0600 file or 0700 directory, and alice can.
func TestTLSCLIUsers(t *testing.T) {
	cfg := cluster.DefaultConfig()
	cfg.Dir, cfg.ChunkSize, cfg.TLS = t.TempDir(), 256<<10, true
	c, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rcfg := client.DefaultConfig()
	rcfg.Master, rcfg.Caller, rcfg.Security = c.MasterAddr(), chunkfs.Root, c.Security()
	root, err := client.New(ctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := root.Mkdir(ctx, "/alice", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := root.Chown(ctx, "/alice", 1000, 1000); err != nil {
		t.Fatal(err)
	}
	for _, id := range []certs.Identity{
		{Role: certs.RoleClient, Name: "alice", UID: 1000, GIDs: []uint32{1000}},
		{Role: certs.RoleClient, Name: "bob", UID: 1001, GIDs: []uint32{1001}},
	} {
		if _, err := c.IssueCertificate(id); err != nil {
			t.Fatal(err)
		}
	}
	inv := invocation{master: c.MasterAddr()}
	as := func(user, stdin string, args ...string) result {
		t.Helper()
		in := inv
		in.stdin = strings.NewReader(stdin)
		return runWith(t, in, append(args, "--tls-dir", c.TLSDir(user))...)
	}
	must := func(r result) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		return r
	}
	const secret = "alice's secret\n"
	must(as("alice", secret, "put", "-", "/alice/secret"))
	must(as("alice", "", "chmod", "600", "/alice/secret"))
	must(as("alice", "", "mkdir", "-m", "700", "/alice/private"))
	must(as("alice", secret, "put", "-", "/alice/private/f"))
	if out := must(as("alice", "", "ls", "-l", "/alice")).stdout; !strings.Contains(out, "secret") || !strings.Contains(out, "1000") {
		t.Errorf("alice's listing:\n%s", out)
	}
	for _, args := range [][]string{
		{"cat", "/alice/secret"},
		{"cat", "/alice/private/f"},
		{"ls", "/alice/private"},
		{"stat", "/alice/private/f"},
		{"rm", "/alice/secret"},
		{"rm", "-r", "/alice/private"},
		{"chmod", "666", "/alice/secret"},
	} {
		r := as("bob", "", args...)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "permission denied") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("bob: chunkfs %v: exit %d, stdout %q, stderr %q; want one line of permission denied", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := as("bob", "bob was here\n", "put", "-", "/alice/secret"); r.code == 0 || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("bob overwrites: exit %d, %s", r.code, r.stderr)
	}
	if out := must(as("alice", "", "cat", "/alice/secret")).stdout; out != secret {
		t.Errorf("alice reads %q", out)
	}
	if out := must(as("alice", "", "cat", "/alice/private/f")).stdout; out != secret {
		t.Errorf("alice reads %q below her 0700 directory", out)
	}
}
