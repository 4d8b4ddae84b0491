package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/cluster"
)

// fastCluster is a cluster whose leases and heartbeats are short, so a
// master restart and garbage collection show within seconds.
func fastCluster(t *testing.T) (*chunkfstest.Cluster, *client.Client, context.Context) {
	return newCluster(t, func(cfg *cluster.Config) {
		cfg.Lease = 2 * time.Second
		cfg.Heartbeat = 100 * time.Millisecond
	})
}

func handles(t *testing.T, ctx context.Context, c *client.Client, p string) []uint64 {
	t.Helper()
	cs, err := c.Chunks(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, ch := range cs {
		out = append(out, ch.Handle)
	}
	return out
}

func writeAt(t *testing.T, ctx context.Context, c *client.Client, p string, data []byte, off int64) {
	t.Helper()
	f, err := c.OpenFile(ctx, p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, ctx context.Context, c *client.Client, p string, data []byte) {
	t.Helper()
	f, err := c.OpenFile(ctx, p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotCopyOnWrite: a write, an append and a truncation on either
// side of a snapshot leave the other side's bytes as they were, and the
// chunk written gets a handle of its own.
func TestSnapshotCopyOnWrite(t *testing.T) {
	_, c, ctx := newCluster(t)
	if err := c.Mkdir(ctx, "/src", 0o755); err != nil {
		t.Fatal(err)
	}
	a, b := randomBytes(1, 2*chunk+chunk/2), randomBytes(2, chunk+100)
	writeFile(t, ctx, c, "/src/a", a)
	writeFile(t, ctx, c, "/src/b", b)
	if err := c.Snapshot(ctx, "/src", "/snap"); err != nil {
		t.Fatal(err)
	}
	before := handles(t, ctx, c, "/src/a")
	if got := handles(t, ctx, c, "/snap/a"); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("snapshot holds %v, source %v: not shared", got, before)
	}

	// The source changes: write in chunk 0, append, truncate b mid-chunk.
	patch := bytes.Repeat([]byte("S"), 1000)
	writeAt(t, ctx, c, "/src/a", patch, 10)
	appendTo(t, ctx, c, "/src/a", []byte("appended"))
	if err := c.Truncate(ctx, "/src/b", chunk/2); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, ctx, c, "/snap/a"); !bytes.Equal(got, a) {
		t.Error("a write or append to the source changed the snapshot")
	}
	if got := readFile(t, ctx, c, "/snap/b"); !bytes.Equal(got, b) {
		t.Error("a truncation of the source changed the snapshot")
	}
	wantA := append(append(append([]byte{}, a[:10]...), patch...), a[1010:]...)
	wantA = append(wantA, "appended"...)
	if got := readFile(t, ctx, c, "/src/a"); !bytes.Equal(got, wantA) {
		t.Error("the source does not read back what was written")
	}
	if got := readFile(t, ctx, c, "/src/b"); !bytes.Equal(got, b[:chunk/2]) {
		t.Error("the source does not read back truncated")
	}
	after := handles(t, ctx, c, "/src/a")
	if after[0] == before[0] || after[1] != before[1] || after[2] == before[2] {
		t.Errorf("handles %v → %v: the chunks written (0 and 2) should be copies, chunk 1 shared", before, after)
	}

	// The snapshot changes: the source, as it is now, stays.
	writeAt(t, ctx, c, "/snap/a", patch, chunk+5)
	appendTo(t, ctx, c, "/snap/b", []byte("more"))
	if err := c.Truncate(ctx, "/snap/a", chunk+chunk/3); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, ctx, c, "/src/a"); !bytes.Equal(got, wantA) {
		t.Error("a write or truncation of the snapshot changed the source")
	}
	if got := readFile(t, ctx, c, "/src/b"); !bytes.Equal(got, b[:chunk/2]) {
		t.Error("an append to the snapshot changed the source")
	}
	wantSnap := append(append(append([]byte{}, a[:chunk+5]...), patch...), a[chunk+1005:]...)[:chunk+chunk/3]
	if got := readFile(t, ctx, c, "/snap/a"); !bytes.Equal(got, wantSnap) {
		t.Error("the snapshot does not read back what was written")
	}
	if got := readFile(t, ctx, c, "/snap/b"); !bytes.Equal(got, append(append([]byte{}, b...), "more"...)) {
		t.Error("the snapshot does not read back what was appended")
	}
}

// TestSnapshotFreesAtZero: deleting the source leaves the snapshot's
// chunks on the chunkservers; deleting the snapshot too deletes them.
func TestSnapshotFreesAtZero(t *testing.T) {
	tc, c, ctx := fastCluster(t)
	data := randomBytes(3, chunk+10)
	writeFile(t, ctx, c, "/f", data)
	hs := handles(t, ctx, c, "/f")
	if err := c.Snapshot(ctx, "/f", "/s"); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // ten heartbeats: garbage would be handed out by now
	for _, h := range hs {
		for i := range tc.Chunkservers() {
			if !tc.HasReplica(i, chunkfs.Handle(h)) {
				t.Fatalf("chunkserver %d deleted chunk %d while the snapshot holds it", i, h)
			}
		}
	}
	if got := readFile(t, ctx, c, "/s"); !bytes.Equal(got, data) {
		t.Fatal("snapshot unreadable after its source was deleted")
	}
	if err := c.Remove(ctx, "/s"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, h := range hs {
		for i := range tc.Chunkservers() {
			for tc.HasReplica(i, chunkfs.Handle(h)) {
				if time.Now().After(deadline) {
					t.Fatalf("chunk %d still on chunkserver %d after its last holder went", h, i)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// TestSnapshotBadInput: refusals change nothing and say why.
func TestSnapshotBadInput(t *testing.T) {
	tc, c, ctx := newCluster(t)
	if err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, ctx, c, "/d/f", []byte("x"))
	writeFile(t, ctx, c, "/taken", []byte("y"))
	if err := c.Chmod(ctx, "/d/f", 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Mkdir(ctx, "/open", 0o777); err != nil {
		t.Fatal(err)
	}
	if err := c.Chmod(ctx, "/open", 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	alice, err := tc.NewClientAs(chunkfs.Caller{UID: 1000, GIDs: []uint32{100}})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	for _, tc := range []struct {
		c        *client.Client
		src, dst string
		want     error
	}{
		{c, "/d", "/d/inside", fs.ErrInvalid},
		{c, "/d", "/taken", fs.ErrExist},
		{c, "/missing", "/x", fs.ErrNotExist},
		{c, "/d", "/missing/x", fs.ErrNotExist},
		{c, "/d", "relative", fs.ErrInvalid},
		{alice, "/d", "/open/x", fs.ErrPermission}, // f is unreadable to alice
		{alice, "/taken", "/y", fs.ErrPermission},  // no write on /
	} {
		err := tc.c.Snapshot(ctx, tc.src, tc.dst)
		if !errors.Is(err, tc.want) {
			t.Errorf("snapshot %s %s: %v, want %v", tc.src, tc.dst, err, tc.want)
		}
	}
	if _, err := c.Stat(ctx, "/open/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused snapshot left %v", err)
	}
	if err := alice.Snapshot(ctx, "/taken", "/open/t"); err != nil {
		t.Errorf("a permitted snapshot failed: %v", err)
	}
}

// TestSnapshotDuringWrites: a snapshot taken while files are written and
// appended to shows, for each file, a prefix of what it ends up holding.
func TestSnapshotDuringWrites(t *testing.T) {
	tc, c, ctx := newCluster(t)
	if err := c.Mkdir(ctx, "/w", 0o755); err != nil {
		t.Fatal(err)
	}
	const writers = 3
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- writeUntil(ctx, tc, fmt.Sprintf("/w/f%d", w), w%2 == 1, stop)
		}()
	}
	// Not on a timer: each file has some pieces before the snapshot and
	// more after, however slow the machine.
	growPast(t, ctx, c, "/w", writers, 0)
	if err := c.Snapshot(ctx, "/w", "/snap"); err != nil {
		t.Fatal(err)
	}
	for w := range writers {
		fi, err := c.Stat(ctx, fmt.Sprintf("/snap/f%d", w))
		if err != nil {
			t.Fatal(err)
		}
		growPast(t, ctx, c, fmt.Sprintf("/w/f%d", w), 1, fi.Length)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for w := range writers {
		p := fmt.Sprintf("/w/f%d", w)
		final, snap := readFile(t, ctx, c, p), readFile(t, ctx, c, "/snap"+p[2:])
		if len(snap) == 0 || len(snap) >= len(final) || !bytes.Equal(snap, final[:len(snap)]) {
			t.Errorf("%s: snapshot of %d bytes is not a proper prefix of the final %d", p, len(snap), len(final))
		}
	}
}

// growPast waits until the n files /w/f0... (or the one file p when n is
// 1) are each longer than length.
func growPast(t *testing.T, ctx context.Context, c *client.Client, p string, n int, length int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for i := 0; i < n; {
		q := p
		if n > 1 {
			q = fmt.Sprintf("%s/f%d", p, i)
		}
		fi, err := c.Stat(ctx, q)
		if err == nil && fi.Length > length {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not grow past %d bytes: %v", q, length, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeUntil writes (or appends records to) p in numbered 4 KiB pieces,
// each synced, until stop is closed.
func writeUntil(ctx context.Context, tc *chunkfstest.Cluster, p string, appends bool, stop chan struct{}) error {
	c, err := tc.NewClient()
	if err != nil {
		return err
	}
	defer c.Close()
	f, err := c.Create(ctx, p)
	if err != nil {
		return err
	}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return f.Close()
		default:
		}
		piece := bytes.Repeat([]byte{byte(i)}, 4<<10)
		if appends {
			_, err = f.Append(piece)
		} else {
			_, err = f.Write(piece)
		}
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			return fmt.Errorf("%s piece %d: %w", p, i, err)
		}
	}
}

// TestSnapshotAcrossMasterRestart: the master restarts between the
// snapshot and the first write; the reference counts, derived from the
// log and checkpoint, still make the write copy the chunk.
func TestSnapshotAcrossMasterRestart(t *testing.T) {
	tc, c, ctx := fastCluster(t)
	data := randomBytes(4, chunk+chunk/2)
	writeFile(t, ctx, c, "/f", data)
	if err := c.Snapshot(ctx, "/f", "/s"); err != nil {
		t.Fatal(err)
	}
	if err := tc.RestartMaster(); err != nil {
		t.Fatal(err)
	}
	writeAt(t, ctx, c, "/f", []byte("after the restart"), 3)
	if got := readFile(t, ctx, c, "/s"); !bytes.Equal(got, data) {
		t.Error("a write after a master restart changed the snapshot")
	}
	if err := c.Remove(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, ctx, c, "/s"); !bytes.Equal(got, data) {
		t.Error("deleting the source after a master restart broke the snapshot")
	}
}

// TestSnapshotCopyWithDeadChunkserver: a chunkserver holding the shared
// chunk is down when the first write copies it; the copy is made on the
// others, the write succeeds and the snapshot is unchanged.
func TestSnapshotCopyWithDeadChunkserver(t *testing.T) {
	tc, c, ctx := newCluster(t)
	data := randomBytes(5, chunk/2)
	writeFile(t, ctx, c, "/f", data)
	if err := c.Snapshot(ctx, "/f", "/s"); err != nil {
		t.Fatal(err)
	}
	cs, err := c.Chunks(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := tc.StopChunkserver(serverIndex(t, tc, cs[0].Replicas[0])); err != nil {
		t.Fatal(err)
	}
	writeAt(t, ctx, c, "/f", []byte("copy on two"), 0)
	if got := readFile(t, ctx, c, "/s"); !bytes.Equal(got, data) {
		t.Error("the write changed the snapshot")
	}
	want := append([]byte("copy on two"), data[11:]...)
	if got := readFile(t, ctx, c, "/f"); !bytes.Equal(got, want) {
		t.Error("the write did not read back")
	}
}
