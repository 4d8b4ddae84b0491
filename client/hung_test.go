package client

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// byteHandler serves every chunk as the bytes of data (byteAt), over the
// real data stream.
type byteHandler struct{ data []byte }

func (byteHandler) BeginPush(chunkfs.DataID, int64) ([]byte, func([]uint32, bool), error) {
	return nil, nil, chunkfs.E("push", "", chunkfs.KindNotSupported, "read-only")
}

func (h byteHandler) ReadChunk(_ chunkfs.Handle, _ chunkfs.Version, off int64, p []byte, sums []uint32) (int, []uint32, error) {
	n := copy(p, h.data[min(off, int64(len(h.data))):])
	if n < len(p) {
		return n, sums, io.EOF
	}
	return n, sums, nil
}

func serveBytes(t *testing.T, size int64) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := rpc.DefaultStreamConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	data := make([]byte, size)
	for i := range data {
		data[i] = byteAt(int64(i))
	}
	srv, err := rpc.NewStreamServer(byteHandler{data}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(func() {
		lis.Close()
		srv.Close()
		cfg.Client.Close()
	})
	return lis.Addr().String()
}

// serveHung accepts connections and reads whatever comes, never answering:
// a SIGSTOPped chunkserver as its peers see it (the kernel keeps the TCP
// connection up). It counts the connections.
func serveHung(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				io.Copy(io.Discard, conn)
				conn.Close()
			}()
		}
	}()
	t.Cleanup(func() { lis.Close() })
	return lis.Addr().String(), &conns
}

// TestHungReplicaDelaysReaderOnce: a reader whose first replica accepts
// and never answers gets its data from another within the bound
// (2 s, here one replicaTimeout), and later reads do not wait for that
// replica again: it is a suspect, tried last.
func TestHungReplicaDelaysReaderOnce(t *testing.T) {
	const size = 8 << 20
	hung, conns := serveHung(t)
	good1, good2 := serveBytes(t, size), serveBytes(t, size)
	dc := rpc.NewDataClient()
	defer dc.Close()
	c := &Client{reader: dc, log: slog.New(slog.DiscardHandler), clock: clock.Real{}, floor: replicaFloor}
	loc := &chunkLoc{handle: 1, version: 1, replicas: []string{hung, good1, good2}}
	ctx := context.Background()

	buf := make([]byte, 128<<10) // a FUSE-sized read, from one replica at a time
	t0 := time.Now()
	if err := c.readReplicas(ctx, "/f", loc, 4096, buf); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	checkBytes(t, buf, 4096, size)
	if took < replicaFloor || took > 2*time.Second {
		t.Fatalf("first read took %v; want the hung replica's deadline, %v, and at most 2 s", took, replicaTimeout(replicaFloor, len(buf)))
	}
	// Later reads, small and parallel, do not wait for it: each takes far
	// less than a deadline.
	for i := range 21 {
		p, off := buf, int64(i)<<17
		if i == 20 {
			p, off = make([]byte, 4<<20), 0 // parallel: the suspect takes no part
		}
		t0 := time.Now()
		if err := c.readReplicas(ctx, "/f", loc, off, p); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(t0); took >= replicaFloor {
			t.Fatalf("read %d took %v: the hung replica held it up again", i, took)
		}
		checkBytes(t, p, off, size)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("hung replica asked on %d connections, want 1", n)
	}
}

// TestHungReplicaParallelRead: a large region read in parallel by a
// client that does not know yet that one replica hangs is whole within
// the bound too.
func TestHungReplicaParallelRead(t *testing.T) {
	const size = 8 << 20
	hung, _ := serveHung(t)
	dc := rpc.NewDataClient()
	defer dc.Close()
	c := &Client{reader: dc, log: slog.New(slog.DiscardHandler), clock: clock.Real{}, floor: replicaFloor}
	a, b := serveBytes(t, size), serveBytes(t, size)
	buf := make([]byte, size)
	read := func(replicas ...string) time.Duration {
		t0 := time.Now()
		if err := c.readReplicas(context.Background(), "/f", &chunkLoc{handle: 1, version: 1, replicas: replicas}, 0, buf); err != nil {
			t.Fatal(err)
		}
		took := time.Since(t0)
		checkBytes(t, buf, 0, size)
		return took
	}
	base := read(a, b) // the same read without the hung replica
	if took := read(a, hung, b); took-base > 2*time.Second {
		t.Fatalf("parallel read with a hung replica took %v, %v more than without it; want at most 2 s more", took, took-base)
	}
}

// TestSuspectsOrder: suspects go last, in order, until their time is up;
// an answer clears one at once.
func TestSuspectsOrder(t *testing.T) {
	var s suspects
	now := time.Unix(1000, 0)
	addrs := []string{"a", "b", "c", "d"}
	if got, good := s.order(addrs, now); good != 4 || !equal(got, addrs) {
		t.Fatalf("no suspects: %v %d", got, good)
	}
	s.mark("a", now)
	s.mark("c", now.Add(time.Second))
	if got, good := s.order(addrs, now.Add(2*time.Second)); good != 2 || !equal(got, []string{"b", "d", "a", "c"}) {
		t.Fatalf("two suspects: %v %d", got, good)
	}
	s.clear("c")
	if got, good := s.order(addrs, now.Add(suspectFor)); good != 4 || !equal(got, addrs) {
		t.Fatalf("after expiry and clear: %v %d", got, good)
	}
	if d := replicaTimeout(replicaFloor, 1<<20); d != replicaFloor+500*time.Millisecond {
		t.Fatalf("timeout of 1 MiB: %v", d)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReadPaceTimeout: with nothing measured a replica's deadline is
// replicaTimeout; once the client's reads are measured slower, it allows
// for a replica slowFactor times slower than their average, but never
// for one below minReplicaRate; a measurement moves the average by
// paceWeight, and an empty one is ignored.
func TestReadPaceTimeout(t *testing.T) {
	var p readPace
	if d := p.timeout(replicaFloor, 512<<10); d != replicaTimeout(replicaFloor, 512<<10) {
		t.Fatalf("nothing measured: %v, want %v", d, replicaTimeout(replicaFloor, 512<<10))
	}
	p.observe(1<<20, time.Millisecond) // 1 GiB/s: the fixed rate stands
	if d := p.timeout(replicaFloor, 512<<10); d != replicaTimeout(replicaFloor, 512<<10) {
		t.Fatalf("fast reads: %v, want %v", d, replicaTimeout(replicaFloor, 512<<10))
	}
	var slow readPace
	slow.observe(512<<10, time.Second) // 512 KiB/s: a replica at 128 KiB/s is still in time
	if d := slow.timeout(replicaFloor, 512<<10); d != replicaFloor+4*time.Second {
		t.Fatalf("reads at 512 KiB/s: deadline of 512 KiB %v, want 5s", d)
	}
	slow.observe(0, time.Second)
	slow.observe(1<<20, 0)
	if d := slow.timeout(replicaFloor, 512<<10); d != replicaFloor+4*time.Second {
		t.Fatalf("empty measurements moved the deadline to %v", d)
	}
	slow.observe(1<<20, time.Second) // 1 MiB/s: the average moves an eighth of the way
	if want := 512.0*1024 + (1024.0*1024-512.0*1024)/8; slow.rate != want {
		t.Fatalf("average %g B/s, want %g", slow.rate, want)
	}
	var crawl readPace
	crawl.observe(64<<10, time.Second) // a quarter is 16 KiB/s: minReplicaRate holds
	if d := crawl.timeout(replicaFloor, 128<<10); d != 2*time.Second {
		t.Fatalf("reads at 64 KiB/s: deadline of a FUSE-sized read %v, want 2s", d)
	}
}
