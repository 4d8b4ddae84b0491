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
	"github.com/chunkfs/chunkfs/client"
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
	g := startLostGrant(t, 1)
	g.servesWritten(2 * time.Second)
}

// TestLostGrantHeldBackAcrossFailover: as TestLostGrantAnswerNeverServesOldBytes,
// with a group of three masters whose leader is killed once c took the
// version. The new leader, which counted c at that version from its
// reports while it followed, held it back only in the old leader's
// memory: it listed c, with the bytes from before the write, and moved it
// to the next version at the next write (issue #15). The fact is logged:
// no master lists c, before or after a write made through the new leader.
func TestLostGrantHeldBackAcrossFailover(t *testing.T) {
	g := startLostGrant(t, 3)
	if err := g.c.StopGroupMaster(g.c.Leader()); err != nil {
		t.Fatal(err)
	}
	if _, err := g.c.WaitLeader(g.ctx); err != nil {
		t.Fatal(err)
	}
	g.servesWritten(2 * time.Second)
	if _, err := g.f.WriteAt([]byte("tail"), int64(len(g.written))); err != nil {
		t.Fatalf("write through the new leader: %v", err)
	}
	if err := g.f.Sync(); err != nil {
		t.Fatalf("sync through the new leader: %v", err)
	}
	g.servesWritten(time.Second)
}

// lostGrant is a cluster where a write was acknowledged without one
// replica (lost) whose Lease call took the write's version after the
// master gave up on it.
type lostGrant struct {
	t            *testing.T
	ctx          context.Context
	c            *Cluster
	cl           *client.Client
	f            *client.File
	old, written []byte
	lost         int // the replica held back
}

// startLostGrant starts a cluster of masters masters and five
// chunkservers, writes old to a file on four replicas, stops a secondary
// and writes written over it while another secondary's version change is
// slowed past the master's wait.
func startLostGrant(t *testing.T, masters int) *lostGrant {
	armed := make([]atomic.Bool, 5)
	done := make([]chan struct{}, 5)
	cfg := DefaultConfig()
	cfg.Masters = masters
	cfg.Chunkservers, cfg.Replication = 5, 4               // two replicas take the grant: no revocation
	cfg.DeadAfter, cfg.Lease = time.Minute, 10*time.Second // the probe takes b out, under the lease
	cfg.Master = func(mc *master.Config) { mc.RPCTimeout = 2 * time.Second }
	cfg.Chunkserver = func(i int, sc *chunkserver.Config) {
		done[i] = make(chan struct{})
		sc.FS = slowMetaFS{FS: sc.FS, armed: &armed[i], done: done[i], delay: 5 * time.Second}
	}
	c, cl, ctx := startWith(t, cfg)
	f, err := cl.OpenFile(ctx, "/f", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	g := &lostGrant{t: t, ctx: ctx, c: c, cl: cl, f: f, old: healBytes(1, 100_000), written: healBytes(2, 100_000)}
	writeAt := func(p []byte) {
		t.Helper()
		if _, err := f.WriteAt(p, 0); err != nil {
			t.Fatalf("write: %v", err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("sync: %v", err)
		}
	}
	writeAt(g.old)
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
	b := secondaries[0]
	g.lost = secondaries[1]
	if err := c.StopChunkserver(b); err != nil {
		t.Fatal(err)
	}
	armed[g.lost].Store(true)
	writeAt(g.written)
	select {
	case <-done[g.lost]:
	case <-ctx.Done():
		t.Fatal("the lost secondary never took the new version")
	}
	return g
}

// servesWritten checks, for d, that every replica the masters list holds
// the bytes written: c reports the new version within a few heartbeats,
// and must never be listed with the old bytes.
func (g *lostGrant) servesWritten(d time.Duration) {
	t := g.t
	t.Helper()
	dc := rpc.NewDataClient()
	defer dc.Close()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		chunks, err := g.cl.Chunks(g.ctx, "/f")
		if err != nil || len(chunks) != 1 {
			t.Fatalf("chunks %+v, %v", chunks, err)
		}
		for _, addr := range chunks[0].Replicas {
			buf := make([]byte, len(g.written))
			n, err := dc.Read(g.ctx, addr, chunkfs.Handle(chunks[0].Handle), chunkfs.Version(chunks[0].Version), 0, buf)
			if err != nil && !errors.Is(err, io.EOF) {
				continue // a clone's target, not done yet
			}
			if !bytes.Equal(buf[:n], g.written) {
				t.Fatalf("replica %s (cs%d, the held-back one: cs%d) at version %d serves %d bytes that are not those written (the old ones: %v)",
					addr, slices.Index(addrs(g.c), addr), g.lost, chunks[0].Version, n, bytes.Equal(buf[:n], g.old))
			}
		}
	}
}
