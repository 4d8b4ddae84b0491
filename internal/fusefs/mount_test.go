package fusefs

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// needFuse skips a test where a real mount is impossible.
func needFuse(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("no fusermount3")
	}
}

// testLogger sends the mount's log to the test's.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// mountT mounts b on a fresh directory and unmounts it when the test ends,
// lazily if something still holds it: no test leaves a mount behind.
func mountT(t testing.TB, b Backend, cfg Config) string {
	t.Helper()
	needFuse(t)
	dir := t.TempDir()
	srv, err := Mount(context.Background(), dir, b, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	t.Cleanup(func() { unmountT(t, srv) })
	return dir
}

func unmountT(t testing.TB, srv *Server) {
	for i := 0; i < 5; i++ {
		if err := srv.Unmount(); err == nil {
			srv.Wait()
			return
		}
		time.Sleep(50 * time.Millisecond) // wait for the kernel to drop the last references
	}
	t.Errorf("mount %s busy; detaching it lazily", srv.Dir())
	if err := Unmount(srv.Dir(), true); err != nil {
		t.Errorf("lazy unmount: %v", err)
	}
}

// subdir makes a fresh directory on the mount for one case.
func subdir(t *testing.T, mnt string) string {
	t.Helper()
	d := filepath.Join(mnt, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	return d
}

// mounted reports whether dir is a mount point, from the kernel's table.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// TestMountRefusedProbeLeavesNoMount: when the check that the kernel
// serves a new mount fails, Mount fails with one line and the kernel
// mount it made is gone.
func TestMountRefusedProbeLeavesNoMount(t *testing.T) {
	needFuse(t)
	orig := probe
	t.Cleanup(func() { probe = orig })
	probed := false
	probe = func(s *fuse.Server) error {
		if err := orig(s); err != nil {
			return err
		}
		probed = true
		return syscall.EACCES // as if the probe's open were refused
	}
	dir := t.TempDir()
	srv, err := Mount(context.Background(), dir, newMemBackend(), DefaultConfig(), testLogger(t))
	if err == nil {
		unmountT(t, srv)
		t.Fatal("mount succeeded with its probe refused")
	}
	if !probed {
		t.Fatalf("the probe did not run: %v", err)
	}
	if !strings.Contains(err.Error(), "not ready") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q: want one line saying the mount was not ready", err)
	}
	if mounted(t, dir) {
		Unmount(dir, true)
		t.Fatalf("%s is still mounted after the failed mount", dir)
	}
}

// TestMountProbeInterruptedIsRetried: an interrupted probe (EINTR, which
// the Go runtime's signals cause) is made again, and the mount works.
func TestMountProbeInterruptedIsRetried(t *testing.T) {
	needFuse(t)
	orig := probe
	t.Cleanup(func() { probe = orig })
	calls := 0
	probe = func(s *fuse.Server) error {
		calls++
		if calls <= 2 {
			return syscall.EINTR
		}
		return orig(s)
	}
	dir := mountT(t, newMemBackend(), DefaultConfig())
	if calls != 3 {
		t.Errorf("probe made %d times, want 3", calls)
	}
	if !mounted(t, dir) {
		t.Fatal("not mounted")
	}
	writeFile(t, filepath.Join(dir, "f"), []byte("x"))
}
