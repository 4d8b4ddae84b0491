package chunkserver

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
)

// The benchmarks measure one client on loopback moving whole 64 MiB chunks
// in requests of benchOp bytes (the client library's write buffer). After
// each iteration a plain single TCP stream over loopback moves the same
// bytes; the reference's throughput (ref-MB/s) and ours as a percentage of
// it (pct-of-ref) are reported beside the usual figures. Interleaving the
// two keeps the comparison fair on a shared machine whose load changes.
//
//	go test -run '^$' -bench . -benchtime 10x ./internal/chunkserver
//
// Chunk data directories are on /dev/shm when it exists, so the figures
// are those of the data path rather than of the disk's file system; set
// CHUNKFS_BENCH_DIR to measure another one.

const (
	benchChunk = 64 << 20
	benchOp    = 8 << 20
)

// refStream is the reference: one loopback TCP connection whose far end
// sends whatever number of bytes it is asked for.
type refStream struct {
	conn    net.Conn
	buf     []byte
	elapsed time.Duration // total time spent moving bytes
	moved   int64
}

func newRefStream(b *testing.B) *refStream {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		defer lis.Close()
		conn, err := lis.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		src := make([]byte, benchOp)
		var n [8]byte
		for {
			if _, err := io.ReadFull(conn, n[:]); err != nil {
				return
			}
			for left := int64(n[0]) << 20; left > 0; left -= benchOp {
				if _, err := conn.Write(src); err != nil {
					return
				}
			}
		}
	}()
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return &refStream{conn: conn, buf: make([]byte, benchOp)}
}

// move streams total bytes (a multiple of benchOp, at most 255 MiB) and
// adds the time it took.
func (r *refStream) move(b *testing.B, total int64) {
	start := time.Now()
	r.conn.Write([]byte{byte(total >> 20), 0, 0, 0, 0, 0, 0, 0})
	if _, err := io.ReadFull(r.conn, make([]byte, 0)); err != nil {
		b.Fatal(err)
	}
	for got := int64(0); got < total; {
		n, err := r.conn.Read(r.buf)
		if err != nil {
			b.Fatal(err)
		}
		got += int64(n)
	}
	r.elapsed += time.Since(start)
	r.moved += total
}

// report adds the reference figures to a benchmark's result.
func (r *refStream) report(b *testing.B, ours time.Duration, total int64) {
	got := float64(total) / 1e6 / ours.Seconds()
	ref := float64(r.moved) / 1e6 / r.elapsed.Seconds()
	b.ReportMetric(ref, "ref-MB/s")
	b.ReportMetric(100*got/ref, "pct-of-ref")
}

// benchCluster starts 3 chunkservers, with their data in benchDirs.
func benchCluster(b *testing.B) *testCluster {
	return newTestClusterIn(b, []string{benchDir(b), benchDir(b), benchDir(b)})
}

// benchDir returns a new directory for a benchmark's chunk data, removed
// when it ends: under CHUNKFS_BENCH_DIR if set, else on /dev/shm if it
// exists, else the test's temporary directory.
func benchDir(b *testing.B) string {
	base := os.Getenv("CHUNKFS_BENCH_DIR")
	if base == "" {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			base = "/dev/shm"
		}
	}
	if base == "" {
		return b.TempDir()
	}
	d, err := os.MkdirTemp(base, "chunkfs-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// timed runs fn for every iteration, then the reference for the same bytes,
// and reports both.
func timed(b *testing.B, setup func(i int), fn func(i int)) {
	ref := newRefStream(b)
	b.SetBytes(benchChunk)
	b.ResetTimer()
	var ours time.Duration
	for i := range b.N {
		b.StopTimer()
		setup(i)
		b.StartTimer()
		start := time.Now()
		fn(i)
		ours += time.Since(start)
		b.StopTimer()
		ref.move(b, benchChunk)
		b.StartTimer()
	}
	b.StopTimer()
	ref.report(b, ours, int64(b.N)*benchChunk)
}

func BenchmarkSequentialRead(b *testing.B) {
	tc := benchCluster(b)
	tc.grant(1, 1)
	data := randBytes(rand.New(rand.NewPCG(1, 1)), benchOp)
	for off := int64(0); off < benchChunk; off += benchOp {
		if err := tc.write(1, 1, off, data); err != nil {
			b.Fatal(err)
		}
	}
	p := make([]byte, benchOp)
	ctx := context.Background()
	timed(b, func(int) {}, func(int) {
		for off := int64(0); off < benchChunk; off += benchOp {
			if _, err := tc.data.Read(ctx, tc.addrs[0], 1, 1, off, p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSequentialWrite3Replicas(b *testing.B) {
	tc := benchCluster(b)
	data := randBytes(rand.New(rand.NewPCG(2, 2)), benchOp)
	timed(b, func(i int) {
		tc.grant(chunkfs.Handle(i+1), 1)
	}, func(i int) {
		for off := int64(0); off < benchChunk; off += benchOp {
			if err := tc.write(chunkfs.Handle(i+1), 1, off, data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRecordAppend1MiB(b *testing.B) {
	tc := benchCluster(b)
	data := randBytes(rand.New(rand.NewPCG(3, 3)), 1<<20)
	timed(b, func(i int) {
		tc.grant(chunkfs.Handle(i+1), 1)
	}, func(i int) {
		for {
			_, err := tc.appendRecord(chunkfs.Handle(i+1), 1, benchChunk, data)
			if chunkfs.KindOf(err) == chunkfs.KindChunkFull {
				return
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
