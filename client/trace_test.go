package client_test

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
)

// recorder keeps every event a Trace is told of.
type recorder struct {
	mu       sync.Mutex // guards the slices below
	attempts []client.WriteAttempt
	pushes   []client.Push
	pieces   []client.PieceRead
	retries  []client.Retry
}

func (r *recorder) trace() *client.Trace {
	return &client.Trace{
		WriteAttempt: func(e client.WriteAttempt) { r.mu.Lock(); r.attempts = append(r.attempts, e); r.mu.Unlock() },
		Push:         func(e client.Push) { r.mu.Lock(); r.pushes = append(r.pushes, e); r.mu.Unlock() },
		PieceRead:    func(e client.PieceRead) { r.mu.Lock(); r.pieces = append(r.pieces, e); r.mu.Unlock() },
		Retry:        func(e client.Retry) { r.mu.Lock(); r.retries = append(r.retries, e); r.mu.Unlock() },
	}
}

// failedAttempts counts the write and append attempts that failed.
func (r *recorder) failedAttempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.attempts {
		if a.Err != nil {
			n++
		}
	}
	return n
}

// tracedClient is a client of tc with r's Trace and no write buffer, so
// that each Write is one mutation per chunk it touches.
func tracedClient(t *testing.T, tc *chunkfstest.Cluster, r *recorder) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Master, cfg.Security, cfg.Trace = tc.MasterAddr(), tc.Security(), r.trace()
	cfg.WriteBuffer, cfg.RetryTimeout = 0, 2*time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTraceWriteAppendRead: a write across a chunk boundary is one attempt
// and one push per chunk, at the offsets and lengths written, on the
// chain the master names; an append reports where the primary put the
// record; a parallel read's pieces add up to the region read.
func TestTraceWriteAppendRead(t *testing.T) {
	const chunk = 2 << 20 // a chunk holds a region read in parallel pieces
	tc, _, ctx := newCluster(t, chunkfstest.ChunkSize(chunk))
	var r recorder
	c := tracedClient(t, tc, &r)
	data := randomBytes(21, chunk+chunk/2)
	writeFile(t, ctx, c, "/traced", data)
	chunks, err := c.Chunks(ctx, "/traced")
	if err != nil || len(chunks) != 2 {
		t.Fatalf("Chunks = %v, %v", chunks, err)
	}
	if len(r.attempts) != 2 || len(r.pushes) != 2 {
		t.Fatalf("%d attempts and %d pushes, want 2 and 2: %+v", len(r.attempts), len(r.pushes), r.attempts)
	}
	for i, a := range r.attempts {
		wantLen := []int{chunk, chunk / 2}[i]
		if a.Err != nil || a.Append || a.Index != int64(i) || a.Offset != 0 || a.Length != wantLen || uint64(a.Handle) != chunks[i].Handle {
			t.Errorf("attempt %d = %+v, want chunk %d (handle %d) at 0, %d bytes, no error", i, a, i, chunks[i].Handle, wantLen)
		}
		if !slices.Contains(a.Replicas, a.Primary) || len(a.Replicas) != 3 || a.Took < a.Prepare+a.Push+a.Apply {
			t.Errorf("attempt %d: primary %q, chain %v, took %v, steps %v %v %v", i, a.Primary, a.Replicas, a.Took, a.Prepare, a.Push, a.Apply)
		}
		if p := r.pushes[i]; p.Err != nil || p.Bytes != wantLen || !slices.Equal(p.Replicas, a.Replicas) || p.Took != a.Push {
			t.Errorf("push %d = %+v, want %d bytes along %v in %v", i, p, wantLen, a.Replicas, a.Push)
		}
	}

	f, err := c.OpenFile(ctx, "/traced", 1, 0) // O_WRONLY
	if err != nil {
		t.Fatal(err)
	}
	off, err := f.Append([]byte("a record"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	a := r.attempts[len(r.attempts)-1]
	if !a.Append || a.Err != nil || a.Index*chunk+a.Offset != off || a.Length <= len("a record") {
		t.Errorf("append attempt %+v, want a framed record at file offset %d", a, off)
	}

	rf, err := c.Open(ctx, "/traced")
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	region := make([]byte, chunk)
	if _, err := rf.ReadAt(region, 0); err != nil || !bytes.Equal(region, data[:chunk]) {
		t.Fatalf("ReadAt = %v, or the data differ", err)
	}
	n := 0
	for _, p := range r.pieces {
		if p.Err == nil && p.Note == "" {
			n += p.Bytes
		}
	}
	if n != chunk || len(r.pieces) < 2 {
		t.Errorf("%d read pieces add up to %d bytes, want several of the %d read", len(r.pieces), n, chunk)
	}
	if len(r.retries) != 0 {
		t.Errorf("retries on a healthy cluster: %+v", r.retries)
	}
}

// TestTraceRetry: a write whose chain has a dead replica fails, and the
// trace is told of the retry and why, until the master places the chunk
// elsewhere.
func TestTraceRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the master to declare a chunkserver dead")
	}
	tc, _, ctx := newCluster(t, chunkfstest.Chunkservers(4))
	var r recorder
	c := tracedClient(t, tc, &r)
	writeFile(t, ctx, c, "/retried", randomBytes(22, chunk/2))
	chunks, err := c.Chunks(ctx, "/retried")
	if err != nil || len(chunks) != 1 {
		t.Fatalf("Chunks = %v, %v", chunks, err)
	}
	if err := tc.StopChunkserver(serverIndex(t, tc, chunks[0].Replicas[len(chunks[0].Replicas)-1])); err != nil {
		t.Fatal(err)
	}
	f, err := c.OpenFile(ctx, "/retried", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(randomBytes(23, 4096), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.retries) == 0 {
		t.Fatal("no retry traced after a write to a dead replica")
	}
	if rt := r.retries[0]; rt.Op != "write" || rt.Path != "/retried" || rt.Index != 0 || rt.Err == nil {
		t.Errorf("retry = %+v, want a write of /retried chunk 0 with its error", rt)
	}
	failed := 0
	for _, a := range r.attempts {
		if a.Err != nil {
			failed++
		}
	}
	if failed < len(r.retries) {
		t.Errorf("%d failed attempts traced for %d retries", failed, len(r.retries))
	}
}
