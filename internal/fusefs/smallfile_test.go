package fusefs

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/cluster"
	"github.com/chunkfs/chunkfs/internal/master"
)

// TestUnlinkedInodeLeavesRoot: the kernel writes back the times of a
// written file's inode when an unlink evicts it, after the mount has
// dropped the node from its tree. That setattr must not land on the root
// directory (the path a detached node had), nor reach the cluster.
func TestUnlinkedInodeLeavesRoot(t *testing.T) {
	b := newMemBackend()
	mnt := mountT(t, b, DefaultConfig())
	name := filepath.Join(mnt, "f")
	if err := os.WriteFile(name, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	root, err := b.Stat(t.Context(), chunkfs.Root, "/")
	if err != nil {
		t.Fatal(err)
	}
	if root.MTime.Equal(fi.ModTime()) || root.MTime.Before(fi.ModTime()) {
		t.Errorf("root's mtime %v after the unlink, the file's was %v: the file's times landed on the root", root.MTime, fi.ModTime())
	}
}

// TestCreateOpenMasterCalls: creating a file through the mount costs the
// kernel's look-up of the name and one create at the master, and opening
// an existing one a single stat: the I/O client opens the file with what
// the caller's client has just learned.
func TestCreateOpenMasterCalls(t *testing.T) {
	var calls atomic.Int64
	tc := chunkfstest.NewCluster(t, chunkfstest.ChunkSize(testChunkSize), func(c *cluster.Config) {
		c.Master = func(mc *master.Config) {
			mc.OnCall = func(method, code string, elapsed time.Duration) {
				if !strings.Contains(method, "Heartbeat") && !strings.Contains(method, "Report") {
					calls.Add(1)
				}
			}
		}
	})
	needFuse(t)
	mnt := mountCluster(t, tc, DefaultConfig())
	dir := subdir(t, mnt)
	name := filepath.Join(dir, "f")
	if _, err := os.Stat(dir); err != nil { // the directory's attributes, cached
		t.Fatal(err)
	}
	before := calls.Load()
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.Load() - before; n > 2 {
		t.Errorf("create: %d calls to the master, want 2 (look-up, create)", n)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(name); err != nil { // its attributes, cached
		t.Fatal(err)
	}
	before = calls.Load()
	r, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.Load() - before; n > 1 {
		t.Errorf("open: %d calls to the master, want 1 (stat)", n)
	}
	r.Close()
}

// TestCloseSyncOff: with SyncOnClose(false) a file written through the
// mount is whole on the cluster once close(2) returns and its release
// asks no replica to sync; fsync(2) still does.
func TestCloseSyncOff(t *testing.T) {
	var syncs atomic.Int64
	tc := chunkfstest.NewCluster(t, chunkfstest.ChunkSize(testChunkSize), func(c *cluster.Config) {
		c.Chunkserver = func(i int, cc *chunkserver.Config) {
			cc.OnCall = func(method, code string, elapsed time.Duration) {
				if strings.HasSuffix(method, "/Sync") {
					syncs.Add(1)
				}
			}
		}
	})
	needFuse(t)
	b := clusterBackend(t, tc)
	b.SyncOnClose(false)
	cfg := DefaultConfig()
	cfg.OpTimeout = 20 * time.Second
	mnt := mountT(t, b, cfg)
	data := bytes.Repeat([]byte("chunkfs "), 1000)
	if err := os.WriteFile(filepath.Join(mnt, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readAllClient(t.Context(), tc.Client(), "/f")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back through another client: %d bytes, %v", len(got), err)
	}
	if err := os.Remove(filepath.Join(mnt, "f")); err != nil { // after its release
		t.Fatal(err)
	}
	if n := syncs.Load(); n != 0 {
		t.Errorf("%d Sync calls without fsync", n)
	}
	f, err := os.Create(filepath.Join(mnt, "g"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if syncs.Load() == 0 {
		t.Error("fsync(2) made no Sync call")
	}
}

func readAllClient(ctx context.Context, c *client.Client, path string) ([]byte, error) {
	f, err := c.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// readSizer records the largest read of the files a backend opens.
type readSizer struct {
	*memBackend
	largest atomic.Int64
}

func (b *readSizer) Open(ctx context.Context, c chunkfs.Caller, p string, write bool) (File, *chunkfs.FileInfo, error) {
	f, fi, err := b.memBackend.Open(ctx, c, p, write)
	if err != nil {
		return nil, nil, err
	}
	return sizedFile{File: f, b: b}, fi, nil
}

type sizedFile struct {
	File
	b *readSizer
}

func (f sizedFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	for {
		l := f.b.largest.Load()
		if int64(len(p)) <= l || f.b.largest.CompareAndSwap(l, int64(len(p))) {
			break
		}
	}
	return f.File.ReadAt(ctx, p, off)
}

// TestReadAheadStopsAtSize: a sequential read of a small file fetches the
// file and a byte more, not a whole read-ahead window.
func TestReadAheadStopsAtSize(t *testing.T) {
	b := &readSizer{memBackend: newMemBackend()}
	cfg := DefaultConfig()
	cfg.KeepCache, cfg.CacheSize, cfg.QuickRead = false, 0, 0 // every read reaches the window
	mnt := mountT(t, b, cfg)
	data := bytes.Repeat([]byte("0123456789abcdef"), 256) // 4 KiB
	name := filepath.Join(mnt, "small")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(name)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes: %v", len(got), err)
	}
	if l := b.largest.Load(); l > int64(len(data))+1 {
		t.Errorf("a read of a %d-byte file fetched %d bytes at once", len(data), l)
	}
}
