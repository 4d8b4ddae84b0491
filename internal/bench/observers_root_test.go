package bench

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestObserversQuickRun is `chunkfs bench observers` end to end, cut to
// two short columns (all reads on the leader, and the writes alone at 4x):
// real masters in their namespaces and cgroups, the load generator in its
// own. It checks that both columns complete, that the leader's queue times
// and CPU were measured, that no read missed a client's own write, and
// that nothing is left behind. It needs root and takes about 30 s.
func TestObserversQuickRun(t *testing.T) {
	needTestbed(t)
	if _, err := os.Stat(cgroupRoot); err != nil {
		t.Skipf("no cgroup v1 cpu controller: %v", err)
	}
	if testing.Short() {
		t.Skip("builds chunkfs and runs a group of masters")
	}
	cfg := QuickObserversConfig()
	cfg.Prefix = "obsq-"
	cfg.Shares, cfg.WriteScales, cfg.Duration = []float64{0}, []float64{4}, 2*time.Second
	cfg.WorkerArgv = testWorkerArgv(t)
	cfg.Binary = buildChunkfs(t)
	cfg.WorkDir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := RunObservers(ctx, cfg, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.Table() + rep.Verdict())
	if len(rep.Columns) != 2 {
		t.Fatalf("%d columns, want 2", len(rep.Columns))
	}
	for _, c := range rep.Columns {
		switch {
		case c.Err != "":
			t.Errorf("%s failed: %s", c.Column.Name, c.Err)
		case c.Load.Writes.N == 0 || c.Load.Errors > 0:
			t.Errorf("%s: %d writes, %d errors: %v", c.Column.Name, c.Load.Writes.N, c.Load.Errors, c.Load.Examples)
		case c.Load.Violations > 0:
			t.Errorf("%s: %d read-your-writes violations: %v", c.Column.Name, c.Load.Violations, c.Load.Examples)
		case c.Leader.Queue.Calls == 0 || c.Leader.CPU <= 0 || c.Leader.CPU > 1.1*cfg.MasterCPU:
			t.Errorf("%s: leader %+v: queue or CPU not measured, or over its cap", c.Column.Name, c.Leader)
		}
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), cfg.Prefix) {
		t.Errorf("namespaces left behind:\n%s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(cgroupRoot, cfg.Prefix+"*")); len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
}
