package fusefs

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/chunkfstest"
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
