package fusefs

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
)

// testChunkSize is small so that the tests cross chunk boundaries often.
const testChunkSize = 256 << 10

func newTestCluster(t *testing.T) *chunkfstest.Cluster {
	t.Helper()
	needFuse(t)
	return chunkfstest.NewCluster(t, chunkfstest.ChunkSize(testChunkSize))
}

// mountCluster mounts the cluster through the client library, as
// `chunkfs mount` does.
func mountCluster(t testing.TB, tc *chunkfstest.Cluster, cfg Config) string {
	t.Helper()
	cfg.OpTimeout = 20 * time.Second
	return mountT(t, clusterBackend(t, tc), cfg)
}

// clusterBackend is a client backend of tc, closed at cleanup.
func clusterBackend(t testing.TB, tc *chunkfstest.Cluster) *ClientBackend {
	t.Helper()
	cc := client.DefaultConfig()
	cc.Master = tc.MasterAddr()
	cc.RetryTimeout = 20 * time.Second
	cc.Logger = testLogger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := NewClientBackend(ctx, cc)
	if err != nil {
		t.Fatalf("client backend: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestPOSIXCluster runs the POSIX suites on a mount of a real in-process
// cluster with the default caches. (TestPOSIXMemory runs them with
// --no-cache too; $CHUNKFS_FUSE_LONG adds the uncached run here, which
// doubles the test's time, one with --async-close and one with
// --async-create too.)
func TestPOSIXCluster(t *testing.T) {
	tc := newTestCluster(t)
	t.Run("cached", func(t *testing.T) { runPOSIX(t, mountCluster(t, tc, DefaultConfig())) })
	if os.Getenv("CHUNKFS_FUSE_LONG") != "" {
		t.Run("nocache", func(t *testing.T) { runPOSIX(t, mountCluster(t, tc, DefaultConfig().NoCache())) })
		t.Run("async-close", func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.AsyncClose = 16
			runPOSIX(t, mountCluster(t, tc, cfg))
		})
		t.Run("async-create", func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.AsyncClose, cfg.AsyncCreate = 16, 64
			runPOSIX(t, mountCluster(t, tc, cfg))
		})
	}
}

// TestFioVerify writes files through the mount with fio, sequentially and
// at random offsets across chunk boundaries, and verifies them with
// CRC32C.
func TestFioVerify(t *testing.T) {
	fio, err := exec.LookPath("fio")
	if err != nil {
		t.Skip("fio not installed")
	}
	tc := newTestCluster(t)
	mnt := mountCluster(t, tc, DefaultConfig())
	for _, job := range [][]string{
		{"--name=seq", "--rw=write", "--bs=64k", "--size=4m"},
		{"--name=rand", "--rw=randwrite", "--bsrange=4k-96k", "--size=3m", "--numjobs=2"},
	} {
		args := append([]string{"--directory=" + mnt, "--ioengine=psync", "--verify=crc32c",
			"--do_verify=1", "--verify_fatal=1", "--thread", "--group_reporting"}, job...)
		cmd := exec.Command(fio, args...)
		cmd.Dir = t.TempDir() // fio leaves its verify state files in its working directory
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fio %v: %v\n%s", job, err, out)
		}
	}
}

// TestTarTree extracts a source tree into the mount with tar and compares
// every file, directory and link with the original, byte for byte.
func TestTarTree(t *testing.T) {
	src := filepath.Join(runtime.GOROOT(), "src", "archive")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("no source tree at %s", src)
	}
	tc := newTestCluster(t)
	mnt := mountCluster(t, tc, DefaultConfig())
	dst := filepath.Join(mnt, "tree")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := fmt.Sprintf("tar -C %q -cf - . | tar -C %q -xf -", src, dst)
	if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	compareTrees(t, src, dst)
}

func compareTrees(t *testing.T, a, b string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		q := filepath.Join(b, rel)
		fa, err := os.Lstat(p)
		if err != nil {
			return err
		}
		fb, err := os.Lstat(q)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if fa.Mode() != fb.Mode() {
			t.Errorf("%s: mode %v, want %v", rel, fb.Mode(), fa.Mode())
		}
		switch {
		case fa.Mode().IsRegular():
			n++
			x, _ := os.ReadFile(p)
			y, err := os.ReadFile(q)
			if err != nil || !bytes.Equal(x, y) {
				t.Errorf("%s: contents differ (%d vs %d bytes, %v)", rel, len(x), len(y), err)
			}
			if !fa.ModTime().Equal(fb.ModTime()) {
				t.Errorf("%s: mtime %v, want %v", rel, fb.ModTime(), fa.ModTime())
			}
		case fa.Mode()&fs.ModeSymlink != 0:
			x, _ := os.Readlink(p)
			y, _ := os.Readlink(q)
			if x != y {
				t.Errorf("%s: link %q, want %q", rel, y, x)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("compared no files")
	}
}

// TestCloseToOpen: what one mount closes, another mount's next open sees
// whole, even with both mounts caching attributes and pages.
func TestCloseToOpen(t *testing.T) {
	tc := newTestCluster(t)
	cfg := DefaultConfig()
	cfg.AttrTimeout, cfg.EntryTimeout = time.Hour, time.Hour // caches that never expire on their own
	a, b := mountCluster(t, tc, cfg), mountCluster(t, tc, cfg)
	pa, pb := filepath.Join(a, "shared"), filepath.Join(b, "shared")
	for i, size := range []int{1000, 600 << 10, 70 << 10, 3} {
		data := make([]byte, size)
		rand.Read(data)
		if err := os.WriteFile(pa, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(pb)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("round %d: the other mount read %d bytes, want the %d just closed", i, len(got), len(data))
		}
	}
	// The other way round, with the reader's pages and size cached:
	// growth, in-place rewrite at an equal size, and truncation.
	for i, size := range []int{5000, 2 << 20, 2 << 20, 100} {
		data := make([]byte, size)
		rand.Read(data)
		if err := os.WriteFile(pb, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(pa); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("reverse round %d: read %d bytes (%v), want the %d just closed", i, len(got), err, len(data))
		}
	}
	if err := os.Truncate(pa, 10); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(pb); err != nil || len(got) != 10 {
		t.Fatalf("after truncate on the other mount: %d bytes, %v", len(got), err)
	}
	// A file held open on one mount while the other rewrites it: a new
	// open sees the new contents, the old descriptor keeps working.
	held, err := os.Open(pb)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := os.WriteFile(pa, []byte("rewritten while open elsewhere"), 0o644); err != nil {
		t.Fatal(err)
	}
	held.Close()
	if got, err := os.ReadFile(pb); err != nil || string(got) != "rewritten while open elsewhere" {
		t.Fatalf("after rewrite: %q, %v", got, err)
	}
	// A rename over the file on one mount is what the other's next open sees.
	tmp := filepath.Join(a, "shared.tmp")
	if err := os.WriteFile(tmp, []byte("replaced"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, pa); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(pb); err != nil || string(got) != "replaced" {
		t.Errorf("after rename on the other mount: %q, %v", got, err)
	}
}

// TestChunkserverKilledDuringCopy stops a chunkserver while a file is
// copied in; the copy must either fail loudly or read back intact.
func TestChunkserverKilledDuringCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	tc := newTestCluster(t)
	mnt := mountCluster(t, tc, DefaultConfig())
	data := make([]byte, 6<<20)
	rand.Read(data)
	p := filepath.Join(mnt, "copy")
	errc := make(chan error, 1)
	go func() {
		f, err := os.Create(p)
		if err != nil {
			errc <- err
			return
		}
		r := bytes.NewReader(data)
		_, err = io.CopyBuffer(f, r, make([]byte, 128<<10))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the copy start; the outcome is checked either way
	if err := tc.StopChunkserver(1); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Logf("copy failed loudly, as allowed: %v", err)
		return
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("copy succeeded but reads back %d bytes (%v), not the original", len(got), err)
	}
}

// TestMasterRestart: the mount keeps working after the master restarts.
func TestMasterRestart(t *testing.T) {
	tc := newTestCluster(t)
	mnt := mountCluster(t, tc, DefaultConfig().NoCache())
	p := filepath.Join(mnt, "f")
	writeFile(t, p, []byte("before"))
	if err := tc.RestartMaster(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tc.WaitAlive(ctx, tc.Chunkservers()); err != nil {
		t.Fatal(err)
	}
	// The master learns chunk locations from the chunkservers' reports
	// after it restarts: the mount recovers once it has them.
	var got []byte
	var err error
	for ctx.Err() == nil {
		if got, err = os.ReadFile(p); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || string(got) != "before" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
	writeFile(t, filepath.Join(mnt, "g"), []byte("after"))
}
