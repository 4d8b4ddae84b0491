package fusefs

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
