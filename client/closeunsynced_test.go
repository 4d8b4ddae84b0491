package client_test

import (
	"bytes"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/cluster"
)

// TestCloseUnsynced: CloseUnsynced pushes what is buffered, so another
// client reads it all, without asking any replica to sync; Close does
// ask; a second close of either kind is an error.
func TestCloseUnsynced(t *testing.T) {
	var syncs atomic.Int64
	_, c, ctx := newCluster(t, func(cfg *cluster.Config) {
		cfg.Chunkserver = func(i int, cc *chunkserver.Config) {
			cc.OnCall = func(method, code string, elapsed time.Duration) {
				if strings.HasSuffix(method, "/Sync") {
					syncs.Add(1)
				}
			}
		}
	})
	data := randomBytes(7, chunk+4096) // two chunks, the second one part full
	f, err := c.Create(ctx, "/unsynced")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.CloseUnsynced(); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load(); n != 0 {
		t.Errorf("CloseUnsynced made %d Sync calls", n)
	}
	if got := readFile(t, ctx, c, "/unsynced"); !bytes.Equal(got, data) {
		t.Errorf("read back %d bytes, not the %d written", len(got), len(data))
	}
	if err := f.CloseUnsynced(); chunkfs.KindOf(err) != chunkfs.KindInvalid {
		t.Errorf("second CloseUnsynced: %v", err)
	}
	writeFile(t, ctx, c, "/synced", data)
	if n := syncs.Load(); n == 0 {
		t.Error("Close made no Sync call")
	}
}

// TestModTimeAtCommit: the mtime given rides on the next flush's commit;
// one no flush took is withdrawn and reported pending. (Only the owner
// chooses a time: TestCommitLengthSetsChosenMtime in the namespace.)
func TestModTimeAtCommit(t *testing.T) {
	_, c, ctx := newCluster(t)
	f, err := c.Create(ctx, "/m")
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC)
	if f.ModTimeAtCommit(want) {
		t.Fatal("a time was pending on a new file")
	}
	if _, err := f.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Stat(ctx, "/m")
	if err != nil || !fi.MTime.Equal(want) || fi.Length != 4 {
		t.Fatalf("after a commit carrying mtime %v: %+v, %v", want, fi, err)
	}
	g, err := c.OpenFile(ctx, "/m", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.ModTimeAtCommit(want.Add(time.Hour))
	if !g.ModTimeAtCommit(time.Time{}) {
		t.Fatal("a time no flush took is not reported pending")
	}
	if _, err := g.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	if fi, err := c.Stat(ctx, "/m"); err != nil || fi.MTime.Equal(want.Add(time.Hour)) || fi.MTime.Equal(want) {
		t.Fatalf("a withdrawn time was set: %+v, %v", fi, err)
	}
}
