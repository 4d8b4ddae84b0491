package fusefs

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRandomWritesSurviveRestart: a random writer's 16 KiB writes, which
// the write-behind holds as fragments until they join, are on the
// replicas once fsync and close return: after every chunkserver and the
// master restart, a fresh client reads them all.
func TestRandomWritesSurviveRestart(t *testing.T) {
	tc := newTestCluster(t)
	cfg := DefaultConfig()
	cfg.WritebackCache = false // every write(2) reaches the write-behind
	cfg.WriteBehind, cfg.FlushSize = 64<<10, 64<<10
	mnt := mountCluster(t, tc, cfg)
	const bs, size = 16 << 10, 1 << 20 // 4 chunks of the test cluster
	f, err := os.Create(filepath.Join(mnt, "rand"))
	if err != nil {
		t.Fatal(err)
	}
	var model []byte
	rng := rand.New(rand.NewPCG(3, 4))
	for i, k := range rng.Perm(size / bs) {
		block := make([]byte, bs)
		for j := range block {
			block[j] = byte(rng.Uint32())
		}
		if _, err := f.WriteAt(block, int64(k*bs)); err != nil {
			t.Fatal(err)
		}
		model = apply(model, block, int64(k*bs))
		if i == size/bs/2 {
			if err := f.Sync(); err != nil {
				t.Fatalf("fsync half way: %v", err)
			}
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range tc.Chunkservers() {
		if err := tc.RestartChunkserver(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.RestartMaster(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.WaitAlive(ctx, tc.Chunkservers()); err != nil {
		t.Fatal(err)
	}
	c, err := tc.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got []byte
	for ctx.Err() == nil { // the master learns the chunks' locations from the reports
		var r io.ReadCloser
		if r, err = c.Open(ctx, "/rand"); err == nil {
			got, err = io.ReadAll(r)
			r.Close()
		}
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || !bytes.Equal(got, model) {
		t.Fatalf("after restarts: %d bytes (%v), equal %v", len(got), err, bytes.Equal(got, model))
	}
}

// TestModTimeSetattrPushesNothing: the kernel's write-back sends a file's
// mtime (a setattr on the open file) whenever it writes the file's pages
// back, here at syncfs(2); that leaves the writes it sent buffered, and the
// close pushes them.
func TestModTimeSetattrPushesNothing(t *testing.T) {
	tc := newTestCluster(t)
	mnt := mountCluster(t, tc, DefaultConfig())
	f, err := os.Create(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := bytes.Repeat([]byte("x"), 64<<10)
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fi, err := tc.Client().Stat(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Length != 0 {
		t.Errorf("the write-back's mtime setattr pushed the buffered writes: length %d on the cluster", fi.Length)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err = tc.Client().Stat(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	if fi.Length != int64(len(data)) {
		t.Errorf("after close: length %d, want %d", fi.Length, len(data))
	}
}
