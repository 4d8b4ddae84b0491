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

// TestQuickRun is `chunkfs bench gfs --quick` end to end: a real testbed, the
// real chunkfs master and chunkservers, workers in their namespaces. It
// checks that every point completes with a rate that is positive, sane and
// not above what the shaping allows, and that nothing is left behind.
func TestQuickRun(t *testing.T) {
	needTestbed(t)
	if testing.Short() {
		t.Skip("builds chunkfs and runs a cluster on a shaped testbed")
	}
	cfg := QuickConfig()
	cfg.Testbed.Prefix = "cfsbq-"
	cfg.WorkerArgv = testWorkerArgv(t)
	cfg.Binary = buildChunkfs(t)
	cfg.WorkDir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	t.Log("\n" + table.String())
	if want := len(cfg.panels()) * len(cfg.Clients); len(rep.Points) != want {
		t.Fatalf("%d points, want %d", len(rep.Points), want)
	}
	for _, p := range rep.Points {
		if p.Err != "" {
			t.Errorf("%s N=%d failed: %s", p.Workload, p.Clients, p.Err)
			continue
		}
		if p.Efficiency <= 0.25 || p.Efficiency > 1.05 || p.LimitRule == "" || p.Bytes < int64(p.Clients)*cfg.ioSize(p.Workload) {
			t.Errorf("%s N=%d: %.3f MB/s of a %.3f MB/s limit, %d bytes: not sane", p.Workload, p.Clients, p.Aggregate, p.Limit, p.Bytes)
		}
		if p.Workload == Writes {
			// Each writer's file is on its panel's file system: the
			// headline's 64 MiB chunks, the variant's WriteChunkSize.
			perClient := p.Bytes / int64(p.Clients)
			want := p.Clients * int((perClient+p.ChunkSize-1)/p.ChunkSize)
			if p.Placement == nil || p.Placement.Chunks != want {
				t.Errorf("writes N=%d: placement %v, want %d chunks of %d bytes", p.Clients, p.Placement, want, p.ChunkSize)
			}
		}
	}
	if len(rep.Network) != len(cfg.Clients) {
		t.Errorf("%d network calibration points, want %d", len(rep.Network), len(cfg.Clients))
	}
	for _, p := range rep.Network {
		if p.Efficiency < 0.5 || p.Efficiency > 1.05 {
			t.Errorf("raw TCP with %d clients: %.3f MB/s of %.3f: not near the shaped rate", p.Clients, p.Aggregate, p.Limit)
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

// buildChunkfs builds the chunkfs binary for the servers, unless
// $CHUNKFS_BIN names one already built.
func buildChunkfs(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CHUNKFS_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "chunkfs")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/chunkfs/chunkfs/cmd/chunkfs")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build chunkfs: %v\n%s", err, out)
	}
	return bin
}

// testWriter sends log lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
