package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/fusefs"
	"github.com/chunkfs/chunkfs/internal/metrics"
)

// TestMountMetrics runs `chunkfs mount --http` on the test cluster, works
// through the mount, and reads its /metrics: every family well-formed, the
// kernel's operations timed by name and a failed lookup counted by errno.
func TestMountMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts the test cluster")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("no fusermount3")
	}
	dir, page := t.TempDir(), freeAddr(t)
	cmd := exec.Command(binary, "mount", "--master", testCluster.MasterAddr(), "--http", page, dir)
	var out syncBuffer
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("mount after Ctrl-C: %v\n%s", err, out.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			fusefs.Unmount(dir, true)
			t.Errorf("mount did not stop on Ctrl-C:\n%s", out.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), " mounted on "); {
		if time.Now().After(deadline) {
			t.Fatalf("chunkfs mount did not mount:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	sub := filepath.Join(dir, "mount-metrics")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(sub, "f")
	if err := os.WriteFile(p, []byte("metrics"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "metrics" {
		t.Fatalf("read back %q: %v", b, err)
	}
	os.Stat(filepath.Join(sub, "missing"))
	code, body := httpGet(t, "http://"+page+"/metrics")
	if _, err := metrics.Check(strings.NewReader(body)); code != 200 || err != nil {
		t.Fatalf("/metrics: %d, %v", code, err)
	}
	for _, want := range []string{
		`chunkfs_fuse_operation_duration_seconds_count{op="lookup"}`,
		`chunkfs_fuse_operation_duration_seconds_count{op="create"}`,
		`chunkfs_fuse_operation_duration_seconds_count{op="write"}`,
		`chunkfs_fuse_operation_duration_seconds_count{op="flush"}`,
		`chunkfs_fuse_operation_errors_total{errno="ENOENT",op="lookup"}`,
		`chunkfs_mount_call_duration_seconds_count{op="create"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in the mount's /metrics:\n%s", want, grepLines(body, "chunkfs_"))
		}
	}
}
