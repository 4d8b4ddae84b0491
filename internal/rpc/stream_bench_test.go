package rpc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// BenchmarkStreamRead reads 64 MiB from memory through the data stream in
// 8 MiB requests, beside a plain TCP stream moving the same bytes (ref-MB/s,
// pct-of-ref). It measures the protocol alone, without disks.
func BenchmarkStreamRead(b *testing.B) {
	const total, op = 64 << 20, 8 << 20
	h := newMemHandler()
	h.chunks[1] = memChunk{version: 1, data: testData(total, 1)}
	addr, _ := startStream(b, h)
	c := NewDataClient()
	defer c.Close()
	p := make([]byte, op)
	ref := refConn(b)
	b.SetBytes(total)
	b.ResetTimer()
	var ours, theirs time.Duration
	for range b.N {
		start := time.Now()
		for off := int64(0); off < total; off += op {
			if _, err := c.Read(context.Background(), addr, 1, 1, off, p); err != nil {
				b.Fatal(err)
			}
		}
		ours += time.Since(start)
		b.StopTimer()
		theirs += ref(total, p)
		b.StartTimer()
	}
	b.ReportMetric(100*theirs.Seconds()/ours.Seconds(), "pct-of-ref")
}

// refConn returns a function that moves n bytes over one loopback TCP
// connection, reading into p, and returns how long it took.
func refConn(b *testing.B) func(n int64, p []byte) time.Duration {
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
		src := make([]byte, 1<<20)
		var req [8]byte
		for {
			if _, err := io.ReadFull(conn, req[:]); err != nil {
				return
			}
			for left := int64(req[0]) << 20; left > 0; left -= int64(len(src)) {
				conn.Write(src)
			}
		}
	}()
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return func(n int64, p []byte) time.Duration {
		start := time.Now()
		conn.Write([]byte{byte(n >> 20), 0, 0, 0, 0, 0, 0, 0})
		for got := int64(0); got < n; {
			k, err := conn.Read(p)
			if err != nil {
				b.Fatal(err)
			}
			got += int64(k)
		}
		return time.Since(start)
	}
}

// BenchmarkPushChain pushes data along a chain of three in-memory replicas
// on loopback: 8 MiB (throughput) and one 64 KiB frame (the latency each
// hop adds).
func BenchmarkPushChain(b *testing.B) {
	var chain []string
	for range 3 {
		addr, _ := startStream(b, newMemHandler())
		chain = append(chain, addr)
	}
	c := NewDataClient()
	defer c.Close()
	for _, size := range []int{8 << 20, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			data := testData(size, 2)
			b.SetBytes(int64(size))
			for b.Loop() {
				if err := c.Push(context.Background(), chain, 1, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPushChainSlowLinks pushes along a chain of three in-memory
// replicas whose ingress is limited to 10 MB/s each (a slow network rather
// than loopback's CPU-bound one), so that the time each hop adds before
// forwarding shows: 1 MiB, and one 64 KiB frame.
func BenchmarkPushChainSlowLinks(b *testing.B) {
	const rate = 10e6 // bytes per second per replica
	var chain []string
	for range 3 {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		cfg := DefaultStreamConfig()
		cfg.Logger = slog.New(slog.DiscardHandler)
		srv, err := NewStreamServer(newMemHandler(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		go srv.Serve(slowListener{lis, rate})
		b.Cleanup(func() { srv.Close(); lis.Close(); cfg.Client.Close() })
		chain = append(chain, lis.Addr().String())
	}
	c := NewDataClient()
	defer c.Close()
	for _, size := range []int{1 << 20, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			data := testData(size, 2)
			b.SetBytes(int64(size))
			for b.Loop() {
				if err := c.Push(context.Background(), chain, 1, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// slowListener's connections deliver at most rate bytes per second, in
// reads of at most 16 KiB (a paced link, without bursts after idle time).
type slowListener struct {
	net.Listener
	rate float64
}

func (l slowListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &slowConn{Conn: conn, rate: l.rate}, nil
}

type slowConn struct {
	net.Conn
	rate float64
	due  time.Time // when the bytes read so far have "arrived"
}

func (c *slowConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p[:min(len(p), 16<<10)])
	// Oversleeping is made up within 1 ms, not lost.
	c.due = later(c.due, time.Now().Add(-time.Millisecond)).Add(time.Duration(float64(n) / c.rate * float64(time.Second)))
	time.Sleep(time.Until(c.due))
	return n, err
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// fileChunks is a StreamHandler over chunk files in a directory that reads
// and checksums like the chunk store (pread, then a CRC32C per block), for
// BenchmarkStreamReadFile.
type fileChunks struct{ dir string }

func (f fileChunks) path(h chunkfs.Handle) string { return filepath.Join(f.dir, fmt.Sprint(h)) }

func (f fileChunks) BeginPush(chunkfs.DataID, int64) ([]byte, func([]uint32, bool), error) {
	return nil, nil, chunkfs.E("push", "", chunkfs.KindInvalid, "read-only")
}

func (f fileChunks) ReadChunk(h chunkfs.Handle, _ chunkfs.Version, off int64, p []byte, sums []uint32) (int, []uint32, error) {
	file, err := os.Open(f.path(h))
	if err != nil {
		return 0, sums, err
	}
	defer file.Close()
	n, err := file.ReadAt(p, off)
	if off%chunkfs.BlockSize == 0 {
		sums = checksum.Blocks(sums, p[:n])
	}
	return n, sums, err
}

func (f fileChunks) OpenChunk(h chunkfs.Handle, v chunkfs.Version) (OpenChunk, error) {
	file, err := os.Open(f.path(h))
	if err != nil {
		return nil, chunkfs.E("read", "", chunkfs.KindNotExist, err.Error())
	}
	return openFile{file}, nil
}

// openFile is a chunk of fileChunks, opened for one read.
type openFile struct{ f *os.File }

func (o openFile) ReadChunk(off int64, p []byte, sums []uint32) (int, []uint32, error) {
	n, err := o.f.ReadAt(p, off)
	if off%chunkfs.BlockSize == 0 {
		sums = checksum.Blocks(sums, p[:n])
	}
	return n, sums, err
}

func (o openFile) File() *os.File { return o.f }

func (o openFile) Close() error { return o.f.Close() }

// BenchmarkStreamReadFile reads a 64 MiB chunk file (on /dev/shm when it
// exists) in 8 MiB requests from two servers in turn, one sending from the
// file with sendfile and one copying from the verified buffer, beside the
// plain TCP stream: the MB/s of each and each as a percentage of the
// stream, all measured in the same iterations.
func BenchmarkStreamReadFile(b *testing.B) {
	const total, op = 64 << 20, 8 << 20
	dir := b.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "chunkfs-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	h := fileChunks{dir}
	if err := os.WriteFile(h.path(1), testData(total, 3), 0o644); err != nil {
		b.Fatal(err)
	}
	var addrs [2]string
	for i, noSendfile := range []bool{false, true} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		cfg := DefaultStreamConfig()
		cfg.Logger = slog.New(slog.DiscardHandler)
		cfg.NoSendfile = noSendfile
		srv, err := NewStreamServer(h, cfg)
		if err != nil {
			b.Fatal(err)
		}
		go srv.Serve(lis)
		b.Cleanup(func() { srv.Close(); lis.Close(); cfg.Client.Close() })
		addrs[i] = lis.Addr().String()
	}
	c := NewDataClient()
	defer c.Close()
	p := make([]byte, op)
	ref := refConn(b)
	b.SetBytes(total)
	b.ResetTimer()
	var took [2]time.Duration
	var theirs time.Duration
	for range b.N {
		for i, addr := range addrs {
			start := time.Now()
			for off := int64(0); off < total; off += op {
				if _, err := c.Read(context.Background(), addr, 1, 1, off, p); err != nil {
					b.Fatal(err)
				}
			}
			took[i] += time.Since(start)
		}
		b.StopTimer()
		theirs += ref(total, p)
		b.StartTimer()
	}
	for i, name := range []string{"sendfile", "copy"} {
		b.ReportMetric(float64(b.N)*total/1e6/took[i].Seconds(), name+"-MB/s")
		b.ReportMetric(100*theirs.Seconds()/took[i].Seconds(), name+"-pct-of-ref")
	}
}
