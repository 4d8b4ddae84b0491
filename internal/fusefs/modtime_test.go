package fusefs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/internal/cluster"
	"github.com/chunkfs/chunkfs/internal/master"
)

// TestWrittenFileTwoLogEntries: a small file written through the mount
// costs the master two log entries, its create (with its first chunk)
// and the commit of its data, which carries the mtime the kernel's
// write-back cache sends at close; and the cluster keeps that mtime.
func TestWrittenFileTwoLogEntries(t *testing.T) {
	tc := chunkfstest.NewCluster(t, chunkfstest.ChunkSize(testChunkSize), func(c *cluster.Config) {
		c.Master = func(mc *master.Config) { mc.LeaseDuration = time.Minute } // no lease horizon logged meanwhile
	})
	needFuse(t)
	mnt := mountCluster(t, tc, DefaultConfig())
	dir := subdir(t, mnt)
	if err := os.WriteFile(filepath.Join(dir, "warm"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := tc.Client()
	entries := func() uint64 {
		t.Helper()
		if _, err := c.Stat(t.Context(), "/"); err != nil {
			t.Fatal(err)
		}
		return uint64(c.StateID())
	}
	for i := range 3 {
		name := filepath.Join(dir, "f"+string(rune('0'+i)))
		before := entries()
		if err := os.WriteFile(name, make([]byte, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if n := entries() - before; n != 2 {
			t.Errorf("file %d: %d log entries, want 2 (create, commit)", i, n)
		}
		cfi, err := c.Stat(t.Context(), "/"+filepath.Base(dir)+"/"+filepath.Base(name))
		if err != nil || cfi.Length != 4096 || !cfi.MTime.Equal(fi.ModTime()) {
			t.Errorf("file %d on the cluster: %+v, %v; the mount says mtime %v", i, cfi, err, fi.ModTime())
		}
	}
}
