package bench

import (
	"context"
	"flag"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var recoveryMode = flag.String("bench.recovery", "", "TestRecoveryRun runs `chunkfs bench recovery`: \"small\" (4 chunkservers, one killed, about a minute besides building chunkfs) or \"quick\" (--quick, about 7 minutes)")

// TestRecoveryRun is `chunkfs bench recovery` end to end on a real testbed,
// when asked for with -bench.recovery: small (4 chunkservers, one killed)
// or quick (--quick: 7 chunkservers, one then two killed). It checks that
// every recovery completes, that the clone rate is sane against its limit,
// that the clients moved data throughout, and that nothing is left behind.
func TestRecoveryRun(t *testing.T) {
	if *recoveryMode != "small" && *recoveryMode != "quick" {
		t.Skip("takes minutes: run with -bench.recovery=small or -bench.recovery=quick")
	}
	needTestbed(t)
	cfg := QuickRecoveryConfig()
	if *recoveryMode == "small" {
		// 5 s leases: the kill waits for the fill's leases to end.
		cfg.Testbed.Chunkservers, cfg.Second, cfg.Lease = 4, false, 5*time.Second
		cfg.FillBytes, cfg.FileBytes, cfg.Baseline = 32*MiB, 8*MiB, 10*time.Second
	}
	cfg.Testbed.Prefix = "recq-"
	cfg.WorkerArgv = testWorkerArgv(t)
	cfg.Binary = buildChunkfs(t)
	cfg.WorkDir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := RunRecovery(ctx, cfg, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	t.Log("\n" + table.String())
	want := 1
	if cfg.Second {
		want = 2
	}
	if len(rep.Phases) != want {
		t.Fatalf("%d recoveries, want %d", len(rep.Phases), want)
	}
	for i, p := range rep.Phases {
		if p.DetectedS <= 0 || p.HealedS < p.DetectedS || p.LostBytes <= 0 {
			t.Errorf("recovery %d: detected %.1f s, healed %.1f s, %d bytes lost: not a recovery", i+1, p.DetectedS, p.HealedS, p.LostBytes)
		}
		if p.Efficiency <= 0.2 || p.Efficiency > 1.2 {
			t.Errorf("recovery %d: %.3f MB/s of a %.3f MB/s limit: not sane", i+1, p.CloneMBps, p.Limit)
		}
	}
	for _, c := range rep.Clients {
		if c.Before <= 0 {
			t.Errorf("%s: no rate before the failure", c.Kind)
		}
		for i, d := range c.During {
			if d <= 0 {
				t.Errorf("%s: nothing moved during recovery %d", c.Kind, i+1)
			}
		}
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), cfg.Testbed.Prefix) {
		t.Errorf("namespaces left behind:\n%s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(cfg.WorkDir, workDirPattern(cfg.Testbed.Prefix)+"*")); len(left) > 0 {
		t.Errorf("work directories left behind: %v", left)
	}
}
