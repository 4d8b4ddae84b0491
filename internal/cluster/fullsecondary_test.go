package cluster

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/chunkstore"
)

// fillableFS is the operating system's file system until filled: then
// it reports no space free and refuses every write, or with growOnly, as
// a real full disk, only those that need a new block (past a file's end):
// the undo of a mutation that ran out of space then goes through, and the
// replica stays good.
type fillableFS struct {
	chunkstore.FS
	full     *atomic.Bool
	growOnly bool
}

func (f fillableFS) OpenFile(name string, flag int, perm fs.FileMode) (chunkstore.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return fillableFile{File: file, full: f.full, growOnly: f.growOnly}, nil
}

func (f fillableFS) Space(dir string) (chunkstore.Disk, error) {
	d, err := f.FS.Space(dir)
	if f.full.Load() {
		d.Free = 0
	}
	return d, err
}

type fillableFile struct {
	chunkstore.File
	full     *atomic.Bool
	growOnly bool
}

func (f fillableFile) WriteAt(p []byte, off int64) (int, error) {
	if f.full.Load() && (!f.growOnly || !f.within(off+int64(len(p)))) {
		return 0, &fs.PathError{Op: "write", Path: "chunk", Err: syscall.ENOSPC}
	}
	return f.File.WriteAt(p, off)
}

// within reports whether the file already holds bytes up to end.
func (f fillableFile) within(end int64) bool {
	size, err := f.Size()
	return err == nil && end <= size
}

// secondaryRig is four chunkservers (each on a fillable file system), a
// client, and /f written and synced on three of them; secondary is the
// index of one of its secondaries.
type secondaryRig struct {
	c         *Cluster
	cl        *client.Client
	f         *client.File
	full      []atomic.Bool
	before    client.ChunkInfo
	secondary int
	written   []byte
}

// startSecondaryRig starts the rig; a chunkserver is dead after deadAfter
// of silence, and leases last lease.
func startSecondaryRig(t *testing.T, ctx context.Context, deadAfter, lease time.Duration) *secondaryRig {
	r := &secondaryRig{full: make([]atomic.Bool, 4)}
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Chunkservers = 4
	cfg.DeadAfter, cfg.Lease = deadAfter, lease
	cfg.Chunkserver = func(i int, sc *chunkserver.Config) { sc.FS = fillableFS{FS: sc.FS, full: &r.full[i]} }
	var err error
	if r.c, err = Start(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.c.Close() })
	if r.cl, err = newDefaultClient(ctx, r.c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cl.Close() })
	if r.f, err = r.cl.OpenFile(ctx, "/f", os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.f.Close() })
	r.write(t, healBytes(1, 100_000))
	chunks, err := r.cl.Chunks(ctx, "/f")
	if err != nil || len(chunks) != 1 || len(chunks[0].Replicas) != 3 {
		t.Fatalf("chunks %+v, %v; want one chunk on 3 replicas", chunks, err)
	}
	r.before, r.secondary = chunks[0], -1
	for i, a := range addrs(r.c) {
		if a != chunks[0].Primary && slices.Contains(chunks[0].Replicas, a) {
			r.secondary = i
			break
		}
	}
	return r
}

// write writes p at the end of /f and syncs it.
func (r *secondaryRig) write(t *testing.T, p []byte) {
	t.Helper()
	if _, err := r.f.Write(p); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := r.f.Sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	r.written = append(r.written, p...)
}

// check makes sure the secondary left chunk 0 at a new version, and
// that the chunk heals and reads back.
func (r *secondaryRig) check(t *testing.T, ctx context.Context) {
	t.Helper()
	after, err := r.cl.Chunks(ctx, "/f")
	if err != nil || slices.Contains(after[0].Replicas, addrs(r.c)[r.secondary]) || after[0].Version <= r.before.Version {
		t.Errorf("after the write: %+v, %v; want the secondary out, at a new version", after, err)
	}
	waitHealed(t, ctx, r.cl)
	if got, err := get(ctx, r.cl, "/f"); err != nil || !bytes.Equal(got, r.written) {
		t.Fatalf("read back %d bytes, %v; want the %d written", len(got), err, len(r.written))
	}
}

// TestWriteGoesOnPastAFullSecondary: a secondary's disk fills up under a
// file being written. The secondary reports its replica corrupt (a write
// failed on it) and the writer retries the no-space answer: the lease
// moves to the other two replicas at a new version, the write goes on,
// and the chunk is re-replicated on the fourth server.
func TestWriteGoesOnPastAFullSecondary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startSecondaryRig(t, ctx, time.Second, 2*time.Second)
	r.full[r.secondary].Store(true)
	r.write(t, healBytes(2, 100_000))
	r.check(t, ctx)
}

// TestWriteGoesOnPastADeadSecondary: a secondary stops under a file being
// written. The writer reports the failure to the master, which probes the
// chunk's replicas and gets no answer from the secondary:
// the lease moves to the other two replicas at a new version before the
// lease ends or the master declares the server dead (a minute each
// here), so the write goes on.
func TestWriteGoesOnPastADeadSecondary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startSecondaryRig(t, ctx, time.Minute, time.Minute)
	if err := r.c.StopChunkserver(r.secondary); err != nil {
		t.Fatal(err)
	}
	r.write(t, healBytes(2, 100_000))
	rep, err := r.cl.ClusterReport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Servers {
		if s.Addr == addrs(r.c)[r.secondary] && !s.Alive {
			t.Fatalf("the write waited until the stopped server was declared dead")
		}
	}
	after, err := r.cl.Chunks(ctx, "/f")
	if err != nil || slices.Contains(after[0].Replicas, addrs(r.c)[r.secondary]) || after[0].Version <= r.before.Version {
		t.Errorf("after the write: %+v, %v; want the stopped secondary out, at a new version", after, err)
	}
	if got, err := get(ctx, r.cl, "/f"); err != nil || !bytes.Equal(got, r.written) {
		t.Fatalf("read back %d bytes, %v; want the %d written", len(got), err, len(r.written))
	}
}
