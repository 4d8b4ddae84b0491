package bench

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSmallfileQuick is `chunkfs bench smallfile` on a small directory:
// a real cluster and mount, worker processes. The workers check that
// every file reads back with the bytes written and the run that every
// file is gone after the remove phase; this test checks that every row
// is there. It asserts nothing of speed.
func TestSmallfileQuick(t *testing.T) {
	needFuse(t)
	if testing.Short() {
		t.Skip("builds chunkfs and runs a cluster and a mount")
	}
	cfg := DefaultSmallConfig()
	cfg.Files, cfg.Size, cfg.Procs = 60, 5000, []int{1, 3}
	cfg.Binary = buildChunkfs(t)
	cfg.WorkerArgv = testWorkerArgv(t)
	cfg.WorkDir = t.TempDir()
	cfg.Timeout = 3 * time.Minute
	rep, err := RunSmallfile(context.Background(), cfg, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	t.Log("\n" + table.String())
	if len(rep.Rows) != len(SmallPhases)*len(cfg.Procs) {
		t.Fatalf("%d rows, want %d", len(rep.Rows), len(SmallPhases)*len(cfg.Procs))
	}
	for _, r := range rep.Rows {
		if r.Rate <= 0 || r.Local <= 0 {
			t.Errorf("%s by %d: %.0f ops/s, local %.0f", r.Phase, r.Procs, r.Rate, r.Local)
		}
	}
	if isMountPoint(cfg.WorkDir + "/mnt") {
		t.Error("the mount is left behind")
	}
}

// TestSmallWorkerChecks runs the worker's phases on a local directory and
// checks that they notice a file that does not read back as written, a
// file of the wrong size and a file missing.
func TestSmallWorkerChecks(t *testing.T) {
	dir := t.TempDir()
	run := func(ph SmallPhase, first, count int) error {
		_, err := smallRunner{SmallTask{Phase: ph, Dir: dir, First: first, Count: count, Size: 100}}.run(context.Background())
		return err
	}
	for _, ph := range []SmallPhase{PhaseCreate, PhaseStat, PhaseRead} {
		if err := run(ph, 0, 5); err != nil {
			t.Fatalf("%s: %v", ph, err)
		}
	}
	if err := run(PhaseCreate, 4, 1); err == nil {
		t.Error("create of an existing file succeeded")
	}
	// File 1 gets file 2's bytes: same size, other content.
	b, err := os.ReadFile(smallName(dir, 2))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(smallName(dir, 1), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(PhaseRead, 0, 5); err == nil || !strings.Contains(err.Error(), "f0000001: not the bytes written") {
		t.Errorf("read of a file with another's bytes: %v", err)
	}
	if err := os.WriteFile(smallName(dir, 3), b[:99], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(PhaseStat, 0, 5); err == nil || !strings.Contains(err.Error(), "f0000003") {
		t.Errorf("stat of a short file: %v", err)
	}
	if err := run(PhaseRead, 3, 1); err == nil || !strings.Contains(err.Error(), "99 bytes, want 100") {
		t.Errorf("read of a short file: %v", err)
	}
	if err := run(PhaseRemove, 0, 5); err != nil {
		t.Fatal(err)
	}
	if err := run(PhaseRemove, 0, 1); err == nil {
		t.Error("remove of a missing file succeeded")
	}
}

func TestSmallConfigValidate(t *testing.T) {
	ok := DefaultSmallConfig()
	ok.Binary, ok.WorkerArgv = "chunkfs", []string{"chunkfs", "bench-worker"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*SmallConfig){
		"no files":        func(c *SmallConfig) { c.Files = 0 },
		"huge files":      func(c *SmallConfig) { c.Size = 1 << 30 },
		"no procs":        func(c *SmallConfig) { c.Procs = nil },
		"more procs":      func(c *SmallConfig) { c.Files, c.Procs = 3, []int{4} },
		"no binary":       func(c *SmallConfig) { c.Binary = "" },
		"no chunkservers": func(c *SmallConfig) { c.Chunkservers = 0 },
		"no timeout":      func(c *SmallConfig) { c.Timeout = 0 },
	} {
		c := ok
		change(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// needFuse skips the test unless this process may mount FUSE.
func needFuse(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("no fusermount3")
	}
}

// TestSmallfileTimeout: a run that outlives its time fails saying so,
// in one line.
func TestSmallfileTimeout(t *testing.T) {
	cfg := DefaultSmallConfig()
	cfg.Mount, cfg.Local = t.TempDir(), t.TempDir() // any directory serves
	cfg.WorkerArgv = testWorkerArgv(t)
	cfg.WorkDir = t.TempDir()
	cfg.Files, cfg.Timeout = 100000, 50*time.Millisecond
	_, err := RunSmallfile(context.Background(), cfg, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err == nil || !strings.Contains(err.Error(), "--timeout 50ms") || strings.Contains(err.Error(), "\n") {
		t.Errorf("run past its timeout: %v", err)
	}
}
