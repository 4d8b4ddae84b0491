package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// chunk is the chunk size of the test clusters: small, so that tests cross
// chunk boundaries with little data.
const chunk = 256 << 10

func newCluster(t *testing.T, opts ...chunkfstest.Option) (*chunkfstest.Cluster, *client.Client, context.Context) {
	t.Helper()
	tc := chunkfstest.NewCluster(t, append([]chunkfstest.Option{chunkfstest.ChunkSize(chunk)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return tc, tc.Client(), ctx
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func writeFile(t *testing.T, ctx context.Context, c *client.Client, path string, data []byte) {
	t.Helper()
	f, err := c.Create(ctx, path)
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

func readFile(t *testing.T, ctx context.Context, c *client.Client, path string) []byte {
	t.Helper()
	f, err := c.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteReadAcrossChunks(t *testing.T) {
	_, c, ctx := newCluster(t)
	data := randomBytes(1, 4*chunk+12345)
	f, err := c.Create(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	// Odd-sized writes straddle chunk boundaries.
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 77777)
		if _, err := f.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, ctx, c, "/big"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, differing from the %d written", len(got), len(data))
	}
	fi, err := c.Stat(ctx, "/big")
	if err != nil || fi.Size() != int64(len(data)) {
		t.Fatalf("Stat = %v, %v; want size %d", fi, err, len(data))
	}
	r, err := c.Open(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, off := range []int64{0, chunk - 10, chunk, 3*chunk - 1, int64(len(data)) - 100} {
		buf := make([]byte, 100)
		n, err := r.ReadAt(buf, off)
		if err != nil && !(err == io.EOF && off+100 >= int64(len(data))) {
			t.Fatalf("ReadAt(%d): %v", off, err)
		}
		if !bytes.Equal(buf[:n], data[off:off+int64(n)]) {
			t.Errorf("ReadAt(%d) differs", off)
		}
	}
	buf := make([]byte, 10)
	if n, err := r.ReadAt(buf, int64(len(data))-4); n != 4 || err != io.EOF {
		t.Errorf("ReadAt at the end = %d, %v; want 4, io.EOF", n, err)
	}
}

func TestIOCopyBothWays(t *testing.T) {
	_, c, ctx := newCluster(t)
	data := randomBytes(2, 2*chunk+999)
	f, err := c.Create(ctx, "/copy")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(f, bytes.NewReader(data)); err != nil || n != int64(len(data)) {
		t.Fatalf("io.Copy into chunkfs = %d, %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := c.Open(ctx, "/copy")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var out bytes.Buffer
	if n, err := io.Copy(&out, g); err != nil || n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("io.Copy out of chunkfs = %d, %v (equal %v)", n, err, bytes.Equal(out.Bytes(), data))
	}
}

func TestSeekWriteAtHolesTruncate(t *testing.T) {
	_, c, ctx := newCluster(t)
	f, err := c.OpenFile(ctx, "/sparse", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("tail"), 2*chunk+5); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("head"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(chunk, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("mid")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 2*chunk+9)
	copy(want, "head")
	copy(want[chunk:], "mid")
	copy(want[2*chunk+5:], "tail")
	if pos, err := f.Seek(0, io.SeekStart); pos != 0 || err != nil {
		t.Fatal(pos, err)
	}
	got, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("sparse read: %d bytes, %v; equal %v", len(got), err, bytes.Equal(got, want))
	}
	if end, err := f.Seek(-4, io.SeekEnd); err != nil || end != int64(len(want))-4 {
		t.Fatalf("Seek end = %d, %v", end, err)
	}
	if err := f.Truncate(chunk + 2); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, ctx, c, "/sparse"); !bytes.Equal(got, want[:chunk+2]) {
		t.Fatalf("after truncate: %d bytes %q…", len(got), got[chunk:])
	}
	if err := c.Truncate(ctx, "/sparse", 3*chunk); err != nil {
		t.Fatal(err)
	}
	got = readFile(t, ctx, c, "/sparse")
	if len(got) != 3*chunk || !bytes.Equal(got[:chunk+2], want[:chunk+2]) || slices.ContainsFunc(got[chunk+2:], func(b byte) bool { return b != 0 }) {
		t.Fatalf("after extending: %d bytes, want zeros past %d", len(got), chunk+2)
	}
}

func TestNamespace(t *testing.T) {
	_, c, ctx := newCluster(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Mkdir(ctx, "/a", 0o755))
	must(c.MkdirAll(ctx, "/a/b/c", 0o750))
	must(c.MkdirAll(ctx, "/a/b/c", 0o750)) // exists: fine
	writeFile(t, ctx, c, "/a/b/f1", []byte("one"))
	writeFile(t, ctx, c, "/a/b/f2", []byte("two!"))

	ents, err := c.ReadDir(ctx, "/a/b")
	must(err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"c", "f1", "f2"}) || !ents[0].IsDir() || ents[1].IsDir() {
		t.Fatalf("ReadDir = %v", names)
	}

	must(c.Rename(ctx, "/a/b/f1", "/a/f1"))
	if got := readFile(t, ctx, c, "/a/f1"); string(got) != "one" {
		t.Fatalf("after rename read %q", got)
	}
	if _, err := c.Stat(ctx, "/a/b/f1"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old name after rename: %v", err)
	}

	must(c.Chmod(ctx, "/a/f1", 0o600))
	must(c.Chown(ctx, "/a/f1", 1234, 5678))
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(c.Chtimes(ctx, "/a/f1", mtime, mtime))
	fi, err := c.Stat(ctx, "/a/f1")
	must(err)
	if fi.Mode().Perm() != 0o600 || fi.UID != 1234 || fi.GID != 5678 || !fi.ModTime().Equal(mtime) || fi.Size() != 3 {
		t.Fatalf("Stat after chmod/chown/chtimes = %+v", fi)
	}

	must(c.Symlink(ctx, "/a/f1", "/a/link"))
	if target, err := c.Readlink(ctx, "/a/link"); err != nil || target != "/a/f1" {
		t.Fatalf("Readlink = %q, %v", target, err)
	}

	must(c.Remove(ctx, "/a/b/f2"))
	if err := c.Remove(ctx, "/a"); !errors.Is(err, chunkfs.ErrNotEmpty) {
		t.Fatalf("Remove of a non-empty directory: %v", err)
	}
	must(c.RemoveAll(ctx, "/a"))
	must(c.RemoveAll(ctx, "/a")) // already gone: fine
	if _, err := c.Stat(ctx, "/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat after RemoveAll: %v", err)
	}
	if err := c.Snapshot(ctx, "/x", "/y"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Snapshot of a missing source = %v, want ErrNotExist", err)
	}
}

func TestErrors(t *testing.T) {
	_, c, ctx := newCluster(t)
	if err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, ctx, c, "/d/file", []byte("x"))
	ro, err := c.Open(ctx, "/d/file")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"open missing", second(c.Open(ctx, "/nope")), fs.ErrNotExist},
		{"stat missing", second(c.Stat(ctx, "/d/nope")), fs.ErrNotExist},
		{"mkdir existing", c.Mkdir(ctx, "/d", 0o755), fs.ErrExist},
		{"create exclusive existing", second(c.OpenFile(ctx, "/d/file", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)), fs.ErrExist},
		{"relative path", second(c.Open(ctx, "d/file")), fs.ErrInvalid},
		{"empty path", c.Mkdir(ctx, "", 0o755), fs.ErrInvalid},
		{"negative ReadAt", second(ro.ReadAt(make([]byte, 1), -1)), fs.ErrInvalid},
		{"write read-only file", second(ro.Write([]byte("x"))), fs.ErrPermission},
		{"write a directory", second(c.OpenFile(ctx, "/d", os.O_WRONLY, 0)), chunkfs.ErrIsDir},
		{"create over a directory", second(c.Create(ctx, "/d")), chunkfs.ErrIsDir},
		{"file as directory", c.Mkdir(ctx, "/d/file/sub", 0o755), chunkfs.ErrNotDir},
		{"remove non-empty", c.Remove(ctx, "/d"), chunkfs.ErrNotEmpty},
		{"truncate negative", c.Truncate(ctx, "/d/file", -1), fs.ErrInvalid},
		{"remove root", c.RemoveAll(ctx, "/"), fs.ErrInvalid},
		{"seek negative", second(ro.Seek(-1, io.SeekStart)), fs.ErrInvalid},
	}
	for _, tc := range cases {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got %v, want an error wrapping %v", tc.name, tc.err, tc.want)
		}
	}
	w, err := c.OpenFile(ctx, "/d/file", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("x"), -5); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("negative WriteAt: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("second Close: %v", err)
	}
	if _, err := w.Read(make([]byte, 1)); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Read after Close: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestPermissions(t *testing.T) {
	tc, c, ctx := newCluster(t)
	if err := c.Mkdir(ctx, "/private", 0o700); err != nil {
		t.Fatal(err)
	}
	alice, err := tc.NewClientAs(chunkfs.Caller{UID: 1000, GIDs: []uint32{1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if _, err := alice.Create(ctx, "/private/x"); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("create in another user's 0700 directory: %v, want ErrPermission", err)
	}
}

func TestFS(t *testing.T) {
	_, c, ctx := newCluster(t)
	for _, d := range []string{"/w/x/y", "/w/z"} {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"/w/a": "alpha", "/w/x/b": "beta", "/w/x/y/c": "gamma", "/top": "t"}
	for p, s := range files {
		writeFile(t, ctx, c, p, []byte(s))
	}
	fsys := c.FS(ctx)
	var walked []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		walked = append(walked, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".", "top", "w", "w/a", "w/x", "w/x/b", "w/x/y", "w/x/y/c", "w/z"}
	if !slices.Equal(walked, want) {
		t.Fatalf("WalkDir = %v\nwant %v", walked, want)
	}
	if b, err := fs.ReadFile(fsys, "w/x/y/c"); err != nil || string(b) != "gamma" {
		t.Fatalf("fs.ReadFile = %q, %v", b, err)
	}
	if _, err := fsys.Open("/w/a"); !errors.Is(err, fs.ErrInvalid) {
		t.Fatalf("Open of a rooted name: %v", err)
	}
	if _, err := fs.Stat(fsys, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat missing: %v", err)
	}
	if err := fstest.TestFS(fsys, "top", "w/a", "w/x/b", "w/x/y/c"); err != nil {
		t.Fatal(err)
	}
}

func newClient(t *testing.T, tc *chunkfstest.Cluster, mutate func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Master = tc.MasterAddr()
	cfg.Caller = chunkfs.Root
	mutate(&cfg)
	c, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestWriteThrough: with no write buffer, each Write is on every replica
// and visible to other clients when it returns.
func TestWriteThrough(t *testing.T) {
	tc, reader, ctx := newCluster(t)
	c := newClient(t, tc, func(cfg *client.Config) { cfg.WriteBuffer = 0 })
	f, err := c.Create(ctx, "/through")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := ""
	for i, part := range []string{"one ", "two ", "three"} {
		if _, err := f.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
		want += part
		if got := readFile(t, ctx, reader, "/through"); string(got) != want {
			t.Fatalf("after write %d another client reads %q, want %q", i, got, want)
		}
	}
}

// TestWriteErrorsSurface: when the data cannot be stored, the error comes
// back from Write, Sync or Close; it is never lost.
func TestWriteErrorsSurface(t *testing.T) {
	tc, _, ctx := newCluster(t)
	c := newClient(t, tc, func(cfg *client.Config) { cfg.RetryTimeout = 300 * time.Millisecond })
	f, err := c.Create(ctx, "/doomed")
	if err != nil {
		t.Fatal(err)
	}
	for i := range tc.Chunkservers() {
		if err := tc.StopChunkserver(i); err != nil {
			t.Fatal(err)
		}
	}
	_, werr := f.Write(make([]byte, 3*chunk)) // crosses chunk boundaries: flushes
	serr := f.Sync()
	cerr := f.Close()
	if werr == nil && serr == nil {
		t.Fatal("Write and Sync both succeeded with every chunkserver down")
	}
	if cerr == nil {
		t.Fatal("Close succeeded after a failed write")
	}
}

func TestReplicationAndReport(t *testing.T) {
	_, c, ctx := newCluster(t)
	writeFile(t, ctx, c, "/r", []byte("replicated"))
	if err := c.SetReplication(ctx, "/r", 2); err != nil {
		t.Fatal(err)
	}
	if fi, err := c.Stat(ctx, "/r"); err != nil || fi.Replication != 2 {
		t.Fatalf("Stat after SetReplication(2) = %+v, %v", fi, err)
	}
	if err := c.SetReplication(ctx, "/r", 0); !errors.Is(err, fs.ErrInvalid) {
		t.Fatalf("SetReplication(0) = %v, want ErrInvalid", err)
	}
	r, err := c.ClusterReport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	alive := 0
	for _, s := range r.Servers {
		if s.Alive {
			alive++
		}
	}
	if alive != 3 || r.Files != 1 || r.ChunkSize != chunk || r.Bytes != int64(len("replicated")) {
		t.Fatalf("ClusterReport = %+v", r)
	}
}

// TestParallelReadAt: one File serves many ReadAt calls at once.
func TestParallelReadAt(t *testing.T) {
	_, c, ctx := newCluster(t)
	data := randomBytes(10, 3*chunk+77)
	writeFile(t, ctx, c, "/par", data)
	f, err := c.Open(ctx, "/par")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 20 {
				off := r.Int64N(int64(len(data)))
				buf := make([]byte, 1+r.IntN(2*chunk))
				n, err := f.ReadAt(buf, off)
				if err != nil && !(err == io.EOF && off+int64(len(buf)) > int64(len(data))) {
					errs <- err
					return
				}
				if !bytes.Equal(buf[:n], data[off:off+int64(n)]) {
					errs <- fmt.Errorf("ReadAt(%d, %d bytes) returned wrong data", off, len(buf))
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestFlushAppliesAfterThePrevious: a flush queued behind another applies
// its data only once that one has finished, and not at all if it failed.
func TestFlushAppliesAfterThePrevious(t *testing.T) {
	_, c, ctx := newCluster(t)
	writeFile(t, ctx, c, "/q", nil)
	data := randomBytes(12, chunk+100)
	gate := make(chan struct{})
	res := make(chan error, 1)
	go func() { res <- client.WriteAfter(ctx, c, "/q", data, 0, gate, nil) }()
	if fi, err := c.Stat(ctx, "/q"); err != nil || fi.Length != 0 {
		t.Fatalf("before the previous flush finished: Stat = %+v, %v; want length 0", fi, err)
	}
	close(gate)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, ctx, c, "/q"); !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, want the %d written", len(got), len(data))
	}

	failed := make(chan struct{})
	close(failed)
	prevErr := chunkfs.E("write", "/q", chunkfs.KindUnavailable, "earlier flush failed")
	if err := client.WriteAfter(ctx, c, "/q", bytes.Repeat([]byte{1}, 2*chunk), 0, failed, prevErr); err != prevErr {
		t.Fatalf("after a failed flush: %v, want its error", err)
	}
	if got := readFile(t, ctx, c, "/q"); !bytes.Equal(got, data) {
		t.Fatal("a flush queued behind a failed one applied its data")
	}
}

// TestManyFlushesInOrder: a stream of writes through a small buffer (many
// flushes, two or many in flight) over a region written before reads back
// as the last data written.
func TestManyFlushesInOrder(t *testing.T) {
	tc, c, ctx := newCluster(t)
	for _, behind := range []int{0, 1 << 20} {
		wc := newClient(t, tc, func(cfg *client.Config) { cfg.WriteBuffer, cfg.WriteBehind = 48<<10, behind })
		name := fmt.Sprintf("/many-%d", behind)
		writeFile(t, ctx, c, name, randomBytes(13, 2*chunk))
		data := randomBytes(uint64(14+behind), 3*chunk+12345)
		f, err := wc.OpenFile(ctx, name, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); off += 10000 {
			if _, err := f.Write(data[off:min(off+10000, len(data))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, ctx, c, name); !bytes.Equal(got, data) {
			t.Fatalf("WriteBehind %d: read %d bytes; differ from the %d written", behind, len(got), len(data))
		}
	}
}

// TestLeaseLapsesDuringPush: a flush whose turn to apply comes after the
// lease it pushed under has lapsed (a long push, flushes ahead of it)
// applies under a fresh lease from the master, without failing and pushing
// again.
func TestLeaseLapsesDuringPush(t *testing.T) {
	tc, c, ctx := newCluster(t)
	var trace recorder
	wc := newClient(t, tc, func(cfg *client.Config) { cfg.Trace = trace.trace() })
	writeFile(t, ctx, c, "/lapse", randomBytes(20, 1000))
	gate := make(chan struct{})
	errc := make(chan error, 1)
	data := randomBytes(21, 100000)
	go func() { errc <- client.WriteAfter(ctx, wc, "/lapse", data, 0, gate, nil) }()
	chunks, err := c.Chunks(ctx, "/lapse")
	if err != nil || len(chunks) != 1 {
		t.Fatalf("chunks of /lapse: %v, %v", chunks, err)
	}
	// Wait until neither the replicas nor the master hold a lease (the
	// master's lasts a little longer): the test cluster's last 2 s and
	// are extended only while the chunk is mutated.
	pool := rpc.NewPool()
	defer pool.Close()
	deadline := time.Now().Add(20 * time.Second)
	for leased := true; leased; {
		if time.Now().After(deadline) {
			t.Fatal("the lease did not lapse")
		}
		leased = false
		for i := range tc.Chunkservers() {
			cs, err := pool.ChunkServer(tc.ChunkserverAddr(i))
			if err != nil {
				t.Fatal(err)
			}
			info, err := cs.ChunkInfo(ctx, &pb.ChunkInfoRequest{Handle: chunks[0].Handle})
			if err == nil && info.Primary {
				leased = true
			}
		}
		if now, err := c.Chunks(ctx, "/lapse"); err != nil || now[0].Primary != "" {
			leased = true
		}
		if leased {
			time.Sleep(50 * time.Millisecond)
		}
	}
	close(gate)
	if err := <-errc; err != nil {
		t.Fatalf("write after the lease lapsed: %v", err)
	}
	if n := trace.failedAttempts(); n != 0 {
		t.Fatalf("%d write attempts failed (and pushed again) after the lease lapsed", n)
	}
	if got := readFile(t, ctx, c, "/lapse"); !bytes.Equal(got, data) {
		t.Fatal("read back other bytes than were written")
	}
}

// A client given several masters skips one that cannot be reached.
func TestMasterListSkipsUnreachable(t *testing.T) {
	tc, _, ctx := newCluster(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	cfg := client.DefaultConfig()
	cfg.Master = dead + ", " + tc.MasterAddr()
	c, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatalf("New with a dead first master: %v", err)
	}
	defer c.Close()
	if err := c.MkdirAll(ctx, "/listed", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, "/listed"); err != nil {
		t.Fatal(err)
	}
	cfg.Master = tc.MasterAddr() + ","
	if _, err := client.New(ctx, cfg); chunkfs.KindOf(err) != chunkfs.KindInvalid {
		t.Fatalf("New with an empty address in the list: %v, want KindInvalid", err)
	}
}

// TestOpenFileWithReplication: a file created with a replication keeps it
// from its first chunk on; a replication out of range is refused and
// creates nothing.
func TestOpenFileWithReplication(t *testing.T) {
	_, c, ctx := newCluster(t)
	f, err := c.OpenFileWith(ctx, "/r1", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644, client.CreateOptions{Replication: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("one replica")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := c.Stat(ctx, "/r1"); err != nil || fi.Replication != 1 {
		t.Fatalf("stat: %+v, %v; want replication 1", fi, err)
	}
	if chunks, err := c.Chunks(ctx, "/r1"); err != nil || len(chunks) != 1 || len(chunks[0].Replicas) != 1 {
		t.Fatalf("chunks %+v, %v; want one chunk on one replica", chunks, err)
	}
	for _, n := range []int{-1, 17} {
		if _, err := c.OpenFileWith(ctx, "/bad", os.O_WRONLY|os.O_CREATE, 0o644, client.CreateOptions{Replication: n}); chunkfs.KindOf(err) != chunkfs.KindInvalid {
			t.Errorf("replication %d: %v, want invalid", n, err)
		}
	}
	if _, err := c.Stat(ctx, "/bad"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused create left %v", err)
	}
}
