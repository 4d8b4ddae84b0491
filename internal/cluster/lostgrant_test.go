package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/chunkstore"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// slowMetaFS is the operating system's file system, but once armed, the
// next open of a chunk's metadata file (a version change) waits delay
// first: the change is made after its caller gave up waiting.
type slowMetaFS struct {
	chunkstore.FS
	armed *atomic.Bool
	done  chan struct{}
	delay time.Duration
}

func (f slowMetaFS) OpenFile(name string, flag int, perm fs.FileMode) (chunkstore.File, error) {
	if strings.HasSuffix(name, ".meta") && f.armed.CompareAndSwap(true, false) {
		time.Sleep(f.delay)
		defer close(f.done)
	}
	return f.FS.OpenFile(name, flag, perm)
}

// TestLostGrantAnswerNeverServesOldBytes: a secondary stops under a write;
// the lease moves to the others at a new version, and the Lease call to
// the other secondary, c, takes the version only after the master gave
// up on it. The write is acknowledged without c. c then reports the new
// version, and was counted again: reads from it returned the bytes from
// before the write (issue #15). Every replica the master lists holds the
// bytes written.
func TestLostGrantAnswerNeverServesOldBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	armed := make([]atomic.Bool, 5)
	done := make([]chan struct{}, 5)
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Chunkservers, cfg.Replication = 5, 4               // two replicas take the grant: no revocation
	cfg.DeadAfter, cfg.Lease = time.Minute, 10*time.Second // the probe takes b out, under the lease
	cfg.Master = func(mc *master.Config) { mc.RPCTimeout = 2 * time.Second }
	cfg.Chunkserver = func(i int, sc *chunkserver.Config) {
		done[i] = make(chan struct{})
		sc.FS = slowMetaFS{FS: sc.FS, armed: &armed[i], done: done[i], delay: 5 * time.Second}
	}
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := newDefaultClient(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f, err := cl.OpenFile(ctx, "/f", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old, written := healBytes(1, 100_000), healBytes(2, 100_000)
	writeAt := func(p []byte) {
		t.Helper()
		if _, err := f.WriteAt(p, 0); err != nil {
			t.Fatalf("write: %v", err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("sync: %v", err)
		}
	}
	writeAt(old)
	chunks, err := cl.Chunks(ctx, "/f")
	if err != nil || len(chunks) != 1 || len(chunks[0].Replicas) != 4 {
		t.Fatalf("chunks %+v, %v; want one chunk on 4 replicas", chunks, err)
	}
	var secondaries []int
	for i, a := range addrs(c) {
		if a != chunks[0].Primary && slices.Contains(chunks[0].Replicas, a) {
			secondaries = append(secondaries, i)
		}
	}
	b, lost := secondaries[0], secondaries[1]
	if err := c.StopChunkserver(b); err != nil {
		t.Fatal(err)
	}
	armed[lost].Store(true)
	writeAt(written)
	select {
	case <-done[lost]:
	case <-ctx.Done():
		t.Fatal("the lost secondary never took the new version")
	}
	// c reports the new version within a few heartbeats; it must never
	// be listed with the old bytes.
	dc := rpc.NewDataClient()
	defer dc.Close()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		chunks, err := cl.Chunks(ctx, "/f")
		if err != nil || len(chunks) != 1 {
			t.Fatalf("chunks %+v, %v", chunks, err)
		}
		for _, addr := range chunks[0].Replicas {
			buf := make([]byte, len(written))
			n, err := dc.Read(ctx, addr, chunkfs.Handle(chunks[0].Handle), chunkfs.Version(chunks[0].Version), 0, buf)
			if err != nil && !errors.Is(err, io.EOF) {
				continue // a clone's target, not done yet
			}
			if !bytes.Equal(buf[:n], written) {
				t.Fatalf("replica %s (cs%d) at version %d serves %d bytes that are not those written (the old ones: %v)",
					addr, slices.Index(addrs(c), addr), chunks[0].Version, n, bytes.Equal(buf[:n], old))
			}
		}
	}
}
