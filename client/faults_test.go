package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// readReplica reads a whole chunk straight from one replica.
func readReplica(ctx context.Context, dc *rpc.DataClient, addr string, ch client.ChunkInfo, size int) ([]byte, error) {
	buf := make([]byte, size)
	n, err := dc.Read(ctx, addr, chunkfs.Handle(ch.Handle), chunkfs.Version(ch.Version), 0, buf)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

// TestConcurrentWritersSameRegion: writers racing over one region leave it
// consistent — every replica byte-identical — and made of whole writes.
func TestConcurrentWritersSameRegion(t *testing.T) {
	tc, c, ctx := newCluster(t)
	writeFile(t, ctx, c, "/shared", make([]byte, 2*chunk))
	const writers = 4
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc, err := tc.NewClient()
			if err != nil {
				errs <- err
				return
			}
			defer wc.Close()
			f, err := wc.OpenFile(ctx, "/shared", os.O_WRONLY, 0)
			if err != nil {
				errs <- err
				return
			}
			block := bytes.Repeat([]byte{byte('A' + w)}, 64<<10)
			for i := range 6 {
				// Overlapping writes, one of them across the chunk boundary.
				if _, err := f.WriteAt(block, chunk-32<<10+int64(i%3)*16<<10); err != nil {
					errs <- err
					return
				}
				if err := f.Sync(); err != nil {
					errs <- err
					return
				}
			}
			errs <- f.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	chunks, err := c.Chunks(ctx, "/shared")
	if err != nil {
		t.Fatal(err)
	}
	dc := rpc.NewDataClient()
	defer dc.Close()
	for _, ch := range chunks {
		var first []byte
		for _, addr := range ch.Replicas {
			b, err := readReplica(ctx, dc, addr, ch, chunk)
			if err != nil {
				t.Fatalf("chunk %d replica %s: %v", ch.Index, addr, err)
			}
			if first == nil {
				first = b
			} else if !bytes.Equal(first, b) {
				t.Fatalf("chunk %d: replicas differ", ch.Index)
			}
		}
	}
}

// TestConcurrentAppenders: 16 appenders; every acknowledged record is read
// back whole exactly once, and nothing torn is returned.
func TestConcurrentAppenders(t *testing.T) {
	tc, c, ctx := newCluster(t)
	f, err := c.Create(ctx, "/log")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	const appenders, each = 16, 40
	clients := make([]*client.Client, appenders)
	for a := range clients {
		ac, err := tc.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ac.Close() })
		clients[a] = ac
	}
	acked := appendConcurrently(t, ctx, clients, "/log", each, func(a, i int) []byte {
		return fmt.Appendf(nil, "appender %02d record %03d %s", a, i, strings.Repeat("x", (a*7+i*13)%5000))
	})
	seen := readRecords(t, ctx, c, "/log", acked)
	for rec, off := range acked {
		if !seen[rec] {
			t.Errorf("acknowledged record at %d not read back: %.40q", off, rec)
		}
	}
	if len(seen) != appenders*each {
		t.Fatalf("read %d records, want %d", len(seen), appenders*each)
	}
}

// TestConcurrentLargeAppenders: 8 appenders of records large enough to be
// reserved before their push, on 1 MiB chunks. A record that does not fit
// is refused when it reserves, never after its data was pushed: no Append
// fails with KindChunkFull. Every acknowledged record is read back whole
// exactly once, across chunks that now may end short of full.
func TestConcurrentLargeAppenders(t *testing.T) {
	tc, c, ctx := newCluster(t, chunkfstest.ChunkSize(1<<20))
	f, err := c.Create(ctx, "/log")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	attempts := &appendAttempts{}
	const appenders, each = 8, 10
	clients := make([]*client.Client, appenders)
	for a := range clients {
		clients[a] = newClient(t, tc, func(cfg *client.Config) { cfg.Trace = &client.Trace{WriteAttempt: attempts.add} })
	}
	acked := appendConcurrently(t, ctx, clients, "/log", each, func(a, i int) []byte {
		return randomBytes(uint64(a*1000+i), 64<<10+(a*7919+i*104729)%(c.MaxRecord()-64<<10+1))
	})
	if n := attempts.count(); n < appenders*each {
		t.Fatalf("%d append attempts logged, want at least %d", n, appenders*each)
	}
	if full := attempts.full(); full > 0 {
		t.Fatalf("%d appends were refused as chunk full after their data was pushed", full)
	}
	fi, err := c.Stat(ctx, "/log")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Chunks < 3 {
		t.Fatalf("log spans %d chunks; want several, so that chunks filled while records were in flight", fi.Chunks)
	}
	seen := readRecords(t, ctx, c, "/log", acked)
	if len(seen) != len(acked) || len(acked) != appenders*each {
		t.Fatalf("read %d records of %d acknowledged, want %d", len(seen), len(acked), appenders*each)
	}
}

// appendConcurrently has every client append each records to path at
// once, record(a, i) being client a's i-th, and returns the acknowledged
// records with their offsets; a failed append fails the test.
func appendConcurrently(t *testing.T, ctx context.Context, clients []*client.Client, path string, each int, record func(a, i int) []byte) map[string]int64 {
	t.Helper()
	var mu sync.Mutex
	acked := map[string]int64{}
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	for a, ac := range clients {
		wg.Go(func() {
			f, err := ac.OpenFile(ctx, path, os.O_WRONLY, 0)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for i := range each {
				rec := record(a, i)
				off, err := f.Append(rec)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acked[string(rec)] = off
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return acked
}

// readRecords reads every record of path with a RecordReader, failing the
// test on a record not in appended or that comes twice; it returns the
// records read.
func readRecords(t *testing.T, ctx context.Context, c *client.Client, path string, appended map[string]int64) map[string]bool {
	t.Helper()
	r, err := c.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rr := client.NewRecordReader(r, c.MaxRecord())
	seen := map[string]bool{}
	for {
		rec, err := rr.Next()
		if err == io.EOF {
			return seen
		}
		if err != nil {
			t.Fatal(err)
		}
		s := string(rec.Data)
		if _, ok := appended[s]; !ok {
			t.Fatalf("read a %d-byte record never appended: %.40q", len(s), s)
		}
		if seen[s] {
			t.Fatalf("record returned twice: %.40q", s)
		}
		seen[s] = true
	}
}

// appendAttempts counts the client's append attempts, as its Trace
// reports them, and those refused as chunk full after their data was
// pushed.
type appendAttempts struct {
	mu           sync.Mutex // guards total and fulls
	total, fulls int
}

func (l *appendAttempts) add(a client.WriteAttempt) {
	if !a.Append {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	if chunkfs.KindOf(a.Err) == chunkfs.KindChunkFull && a.Push > 0 {
		l.fulls++
	}
}

func (l *appendAttempts) count() int { l.mu.Lock(); defer l.mu.Unlock(); return l.total }
func (l *appendAttempts) full() int  { l.mu.Lock(); defer l.mu.Unlock(); return l.fulls }

// TestCorruptReplica: a byte flipped in one replica — the one the client
// reads first — is detected (a checksum failure, reported to the master)
// and the read still returns the right data from another replica.
func TestCorruptReplica(t *testing.T) {
	tc, _, ctx := newCluster(t)
	logs := &logRecorder{}
	c := newClient(t, tc, func(cfg *client.Config) {
		cfg.Logger = slog.New(logs)
	})
	data := randomBytes(3, chunk+1000)
	writeFile(t, ctx, c, "/precious", data)
	chunks, err := c.Chunks(ctx, "/precious")
	if err != nil || len(chunks) != 2 {
		t.Fatalf("Chunks = %v, %v", chunks, err)
	}
	ch := chunks[0]
	first := client.ReplicaOrder(c, ch.Handle, ch.Replicas)[0]
	if err := tc.CorruptReplica(serverIndex(t, tc, first), chunkfs.Handle(ch.Handle), 4321); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, ctx, c, "/precious"); !bytes.Equal(got, data) {
		t.Fatal("read wrong data with a corrupted replica")
	}
	if !logs.saw(chunkfs.KindChecksum) {
		t.Fatal("the client never met the corrupted replica's checksum failure")
	}
}

// logRecorder is a slog handler that keeps the error kinds it is given.
type logRecorder struct {
	mu    sync.Mutex // guards kinds
	kinds []chunkfs.Kind
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok {
			l.mu.Lock()
			l.kinds = append(l.kinds, chunkfs.KindOf(err))
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *logRecorder) saw(k chunkfs.Kind) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.kinds, k)
}

func serverIndex(t *testing.T, tc *chunkfstest.Cluster, addr string) int {
	t.Helper()
	for i := range tc.Chunkservers() {
		if tc.ChunkserverAddr(i) == addr {
			return i
		}
	}
	t.Fatalf("no chunkserver at %s", addr)
	return -1
}

// TestChunkserverKilledMidWrite: a chunkserver dies while a file is being
// written; every byte acknowledged (by Sync) before or after is read back.
func TestChunkserverKilledMidWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the master to declare a chunkserver dead")
	}
	tc, c, ctx := newCluster(t, chunkfstest.Chunkservers(4))
	data := randomBytes(4, 3*chunk)
	f, err := c.Create(ctx, "/survivor")
	if err != nil {
		t.Fatal(err)
	}
	half := len(data) / 2
	for off := 0; off < len(data); off += 32 << 10 {
		if off == half {
			chunks, err := c.Chunks(ctx, "/survivor")
			if err != nil || len(chunks) == 0 {
				t.Fatalf("Chunks = %v, %v", chunks, err)
			}
			last := chunks[len(chunks)-1]
			if err := tc.StopChunkserver(serverIndex(t, tc, last.Replicas[0])); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.Write(data[off : off+32<<10]); err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("sync at %d: %v", off, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rc, err := tc.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got := readFile(t, ctx, rc, "/survivor"); !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes after a chunkserver died; differ from the %d written", len(got), len(data))
	}
}

// TestRestarts: the client rides over a master restart and a chunkserver
// restart without being recreated.
func TestRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts servers")
	}
	tc, c, ctx := newCluster(t)
	data := randomBytes(8, chunk+500)
	writeFile(t, ctx, c, "/keep", data)
	if err := tc.RestartMaster(); err != nil {
		t.Fatal(err)
	}
	if err := tc.WaitAlive(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, ctx, c, "/keep"); !bytes.Equal(got, data) {
		t.Fatal("data differs after a master restart")
	}
	if err := tc.RestartChunkserver(1); err != nil {
		t.Fatal(err)
	}
	if err := tc.WaitAlive(ctx, 3); err != nil {
		t.Fatal(err)
	}
	more := randomBytes(9, 1000)
	f, err := c.OpenFile(ctx, "/keep", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(more); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := readFile(t, ctx, c, "/keep"), append(data, more...); !bytes.Equal(got, want) {
		t.Fatalf("data differs after a chunkserver restart and a write: %s", firstDiff(got, want))
	}
}

// firstDiff describes where got and want first differ.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("got %d bytes, want %d; first difference at %d", len(got), len(want), i)
}

// TestParallelReadCorruptAndDownReplicas: a large region is read in pieces
// from every replica; pieces that hit a corrupted replica, or one whose
// server is down, come back right from the others.
func TestParallelReadCorruptAndDownReplicas(t *testing.T) {
	const big = 4 << 20
	tc := chunkfstest.NewCluster(t, chunkfstest.ChunkSize(big))
	ctx := context.Background()
	logs := &logRecorder{}
	c := newClient(t, tc, func(cfg *client.Config) { cfg.Logger = slog.New(logs) })
	data := randomBytes(11, big)
	writeFile(t, ctx, c, "/big", data)
	chunks, err := c.Chunks(ctx, "/big")
	if err != nil || len(chunks) != 1 {
		t.Fatalf("Chunks = %v, %v", chunks, err)
	}
	ch := chunks[0]
	order := client.ReplicaOrder(c, ch.Handle, ch.Replicas)
	for _, addr := range order[:2] { // every piece on two of the three
		for off := int64(1000); off < big; off += 256 << 10 {
			if err := tc.CorruptReplica(serverIndex(t, tc, addr), chunkfs.Handle(ch.Handle), off); err != nil {
				t.Fatal(err)
			}
		}
	}
	f, err := c.Open(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, big)
	if n, err := f.ReadAt(buf, 0); err != nil || n != big || !bytes.Equal(buf, data) {
		t.Fatalf("ReadAt with corrupted replicas = %d, %v (%s)", n, err, firstDiff(buf, data))
	}
	if !logs.saw(chunkfs.KindChecksum) {
		t.Fatal("no piece met a corrupted replica's checksum failure")
	}
	if err := tc.StopChunkserver(serverIndex(t, tc, order[0])); err != nil {
		t.Fatal(err)
	}
	clear(buf)
	if n, err := f.ReadAt(buf, 0); err != nil || n != big || !bytes.Equal(buf, data) {
		t.Fatalf("ReadAt with a replica down = %d, %v (%s)", n, err, firstDiff(buf, data))
	}
}
