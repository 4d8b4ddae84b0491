package rpc

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/checksum"
)

// BenchmarkReadFloor shows what this machine allows a verified read, in the
// same iterations: (1) the data stream reading a 64 MiB chunk file (on
// /dev/shm when it exists) in 8 MiB requests from a sendfile server; (2)
// the floor: the same bytes moved with no protocol at all, by a server
// that reads and verifies 512 KiB pieces (pread, then a CRC32C per 64 KiB
// block checked against stored sums) on one goroutine and sends each with
// one sendfile on another, and a client that reads whatever has arrived
// straight into its buffer and sums every 64 KiB block; (3) the plain TCP
// stream of BenchmarkStreamRead; and, to show what the verification costs,
// (4) the floor without it: sendfile of the file and plain reads, no
// pread and no CRC32C on either side. Reported: each as a percentage of
// (3), and the stream as a percentage of the floor.
//
//	go test -run '^$' -bench ReadFloor -benchtime 20x -count 3 ./internal/rpc
func BenchmarkReadFloor(b *testing.B) {
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
	data := testData(total, 3)
	if err := os.WriteFile(h.path(1), data, 0o644); err != nil {
		b.Fatal(err)
	}
	sums := checksum.Blocks(nil, data)
	addr, _ := startStream(b, h)
	c := NewDataClient()
	defer c.Close()
	f, err := os.Open(h.path(1))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	floor := floorConn(b, f, sums, true)
	bare := floorConn(b, f, sums, false)
	ref := refConn(b)
	p := make([]byte, total)
	b.SetBytes(total)
	b.ResetTimer()
	var ours, floors, bares, theirs time.Duration
	for range b.N {
		start := time.Now()
		for off := int64(0); off < total; off += op {
			if _, err := c.Read(context.Background(), addr, 1, 1, off, p[:op]); err != nil {
				b.Fatal(err)
			}
		}
		ours += time.Since(start)
		floors += floor(total, p)
		bares += bare(total, p)
		b.StopTimer()
		theirs += ref(total, p[:op])
		b.StartTimer()
	}
	b.ReportMetric(100*theirs.Seconds()/ours.Seconds(), "stream-pct-of-ref")
	b.ReportMetric(100*theirs.Seconds()/floors.Seconds(), "floor-pct-of-ref")
	b.ReportMetric(100*floors.Seconds()/ours.Seconds(), "stream-pct-of-floor")
	b.ReportMetric(100*theirs.Seconds()/bares.Seconds(), "unverified-pct-of-ref")
}

// floorConn starts the floor server of BenchmarkReadFloor for file f with
// block sums sums, and returns a function that reads n bytes from it into
// p, checking every block when verify is set, and returns how long that
// took.
func floorConn(b *testing.B, f *os.File, sums []uint32, verify bool) func(n int64, p []byte) time.Duration {
	const piece = 512 << 10
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
		rc := rawTCP(conn)
		type span struct{ off, n int64 }
		free, filled := make(chan []byte, 2), make(chan span)
		free <- make([]byte, piece)
		free <- make([]byte, piece)
		var req [8]byte
		for {
			if _, err := io.ReadFull(conn, req[:]); err != nil {
				return
			}
			total := int64(binary.LittleEndian.Uint64(req[:]))
			go func() { // read and verify
				defer close(filled)
				for off := int64(0); off < total; off += piece {
					n := min(piece, total-off)
					if verify {
						buf := <-free
						n, _ := f.ReadAt(buf, off)
						if checksum.Verify(buf[:n], sums[off/checksum.BlockSize:]) != nil {
							panic("floor: bad sum")
						}
						free <- buf
					}
					filled <- span{off, int64(n)}
				}
			}()
			for s := range filled { // send
				rc.Write(func(fd uintptr) bool {
					for s.n > 0 {
						k, err := syscall.Sendfile(int(fd), int(f.Fd()), &s.off, int(s.n))
						if err == syscall.EAGAIN {
							return false
						}
						if err != nil {
							return true
						}
						s.n -= int64(k)
					}
					return true
				})
			}
			filled = make(chan span)
		}
	}()
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return func(n int64, p []byte) time.Duration {
		start := time.Now()
		var req [8]byte
		binary.LittleEndian.PutUint64(req[:], uint64(n))
		conn.Write(req[:])
		summed := 0
		for got := 0; got < int(n); {
			k, err := conn.Read(p[got:n])
			if err != nil {
				b.Fatal(err)
			}
			got += k
			for ; verify && summed < got && (summed+checksum.BlockSize <= got || got == int(n)); summed += checksum.BlockSize {
				if checksum.Sum(p[summed:min(summed+checksum.BlockSize, got)]) != sums[summed/checksum.BlockSize] {
					b.Fatal("floor: bad sum on the client")
				}
			}
		}
		return time.Since(start)
	}
}
