package client_test

import (
	"bytes"
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
