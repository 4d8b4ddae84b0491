package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/cluster"
)

// drainCluster starts a cluster of four chunkservers of its own (one can
// be drained and leave three for the replication), with a superuser
// client and a file.
func drainCluster(t *testing.T) (*cluster.Cluster, *client.Client) {
	t.Helper()
	cfg := cluster.DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Chunkservers = 4
	cfg.ChunkSize = 256 << 10
	cl, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ccfg := client.DefaultConfig()
	ccfg.Master = cl.MasterAddr()
	ccfg.Caller = chunkfs.Root
	c, err := client.New(context.Background(), ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.MkdirAll(context.Background(), "/w", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, c, "/w/f", []byte(strings.Repeat("chunkfs ", 100000)), 0o644)
	return cl, c
}

func TestAdminBalance(t *testing.T) {
	cl, _ := drainCluster(t)
	inv := invocation{master: cl.MasterAddr()}
	run := func(args ...string) string {
		t.Helper()
		r := runWith(t, inv, args...)
		if r.code != 0 {
			t.Fatalf("chunkfs %s: exit %d, stderr: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	if out := run("admin", "balance"); !strings.Contains(out, "Balancer:          running, threshold 10 points") {
		t.Errorf("admin balance (on by default):\n%s", out)
	}
	if out := run("admin", "balance", "stop"); !strings.Contains(out, "stopped") {
		t.Errorf("admin balance stop:\n%s", out)
	}
	if out := run("admin", "balance", "status", "--json"); !strings.Contains(out, `"running": false`) {
		t.Errorf("admin balance status --json:\n%s", out)
	}
	if out := run("admin", "balance", "start", "--threshold", "7.5"); !strings.Contains(out, "running, threshold 7.5 points") {
		t.Errorf("admin balance start --threshold 7.5:\n%s", out)
	}
	if out := run("admin", "report"); !strings.Contains(out, "Balancer:          running (threshold 7.5 points)") {
		t.Errorf("admin report does not show the balancer:\n%s", out)
	}
}

func TestAdminDecommission(t *testing.T) {
	cl, c := drainCluster(t)
	inv := invocation{master: cl.MasterAddr()}
	run := func(args ...string) string {
		t.Helper()
		r := runWith(t, inv, args...)
		if r.code != 0 {
			t.Fatalf("chunkfs %s: exit %d, stderr: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	victim := cl.ChunkserverAddr(2)
	if out := run("admin", "decommission"); !strings.Contains(out, "No chunkserver is being decommissioned.") {
		t.Errorf("admin decommission with none:\n%s", out)
	}
	out := run("admin", "decommission", victim)
	if !strings.Contains(out, victim) || !strings.Contains(out, "decommission") || !strings.Contains(out, "REMAINING") {
		t.Errorf("admin decommission %s:\n%s", victim, out)
	}
	for !strings.Contains(out, "decommissioned (safe to remove)") {
		time.Sleep(100 * time.Millisecond)
		out = run("admin", "decommission")
	}
	if rep := run("admin", "report"); !strings.Contains(rep, "decommissioned (safe to remove)") {
		t.Errorf("admin report does not show the state:\n%s", rep)
	}
	if rep := run("admin", "report", "--json"); !strings.Contains(rep, `"state": "decommissioned"`) {
		t.Errorf("admin report --json does not show the state:\n%s", rep)
	}
	if out := run("admin", "recommission", victim); !strings.Contains(out, "live") {
		t.Errorf("admin recommission:\n%s", out)
	}
	if out := run("admin", "decommission"); !strings.Contains(out, "No chunkserver is being decommissioned.") {
		t.Errorf("admin decommission after recommission:\n%s", out)
	}
	if states, err := c.Decommission(context.Background(), "", false); err != nil || len(states) != 0 {
		t.Errorf("after recommission: %+v, %v", states, err)
	}
}

// TestAdminBalanceAndDecommissionFail: bad input and a caller other than
// the superuser each fail with one line and change nothing.
func TestAdminBalanceAndDecommissionFail(t *testing.T) {
	cl, c := drainCluster(t)
	makeBinaryReachable(t)
	local := localFixtures(t)
	inv := invocation{master: cl.MasterAddr(), dir: local}
	user := invocation{master: cl.MasterAddr(), dir: local, unprivileged: true}
	victim := cl.ChunkserverAddr(1)
	for _, tc := range []failCase{
		{"balance threshold zero", []string{"admin", "balance", "start", "--threshold", "0"}, 2, "--threshold", inv},
		{"balance threshold too big", []string{"admin", "balance", "start", "--threshold", "150"}, 2, "--threshold", inv},
		{"balance threshold not a number", []string{"admin", "balance", "start", "--threshold", "lots"}, 2, "threshold", inv},
		{"balance threshold with stop", []string{"admin", "balance", "stop", "--threshold", "5"}, 2, "--threshold", inv},
		{"balance unknown action", []string{"admin", "balance", "faster"}, 2, "faster", inv},
		{"decommission unknown server", []string{"admin", "decommission", "cs-nosuch"}, 1, "cs-nosuch", inv},
		{"recommission unknown server", []string{"admin", "recommission", "10.9.9.9:1"}, 1, "10.9.9.9:1", inv},
		{"recommission nothing", []string{"admin", "recommission"}, 2, "chunkserver", inv},
		{"decommission two", []string{"admin", "decommission", victim, victim}, 2, "one chunkserver", inv},
		{"balance stop not superuser", []string{"admin", "balance", "stop"}, 1, "superuser", user},
		{"decommission not superuser", []string{"admin", "decommission", victim}, 1, "superuser", user},
	} {
		checkFails(t, c, "/w", local, tc)
	}
	// Nothing changed: the balancer runs, no server is being drained.
	st, err := c.Balance(context.Background(), "status", 0)
	if err != nil || !st.Running || st.Threshold != 10 {
		t.Errorf("balancer after the failures: %+v, %v", st, err)
	}
	if states, err := c.Decommission(context.Background(), "", false); err != nil || len(states) != 0 {
		t.Errorf("servers being decommissioned after the failures: %+v, %v", states, err)
	}
}
