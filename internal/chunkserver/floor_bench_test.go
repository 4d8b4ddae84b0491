package chunkserver

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The floor benchmarks measure what this machine allows for a
// three-replica write without any of chunkfs: a client sends the chunk
// over loopback TCP to the first of three plain relays, each of which
// passes every buffer it receives on to the next and writes it into a new
// file in the benchmark directory (/dev/shm when it exists), as a replica
// must. No checksums, no framing, no RPCs, no acknowledgement through the
// chain: an upper bound for BenchmarkSequentialWrite3Replicas and, as a
// record append moves the same bytes, for BenchmarkRecordAppend1MiB.
// Each iteration is followed by the same single TCP stream reference as
// the other benchmarks, so pct-of-ref is comparable with theirs.
//
//	go test -run '^$' -bench Floor -benchtime 10x -count 3 ./internal/chunkserver
//
// BenchmarkFloorChain3 is the same without the file writes: the part of
// the floor that is socket copies alone.

func BenchmarkFloorWrite3Replicas(b *testing.B) { benchFloorMode(b, true, false) }

func BenchmarkFloorChain3(b *testing.B) { benchFloorMode(b, false, false) }

// BenchmarkFloorSpliceWrite3Replicas is the cheapest three-replica write
// Linux offers: each relay splices what arrives into a pipe, tees it into
// a second pipe that is spliced into the next relay's socket, and splices
// the first into its file. No byte crosses into user space at a relay; the
// only copies are the sockets' and the file writes'.
func BenchmarkFloorSpliceWrite3Replicas(b *testing.B) { benchFloorMode(b, true, true) }

// BenchmarkFloorSpliceChain3 forwards with splice(2) (io.Copy between two
// TCP connections), so the relays copy nothing; the last one reads.
func BenchmarkFloorSpliceChain3(b *testing.B) { benchFloorMode(b, false, true) }

// relay is one replica of the floor: it accepts one connection per
// iteration, passes what it reads to next (if any) and into a new file at
// path, and reports on done when it has stored benchChunk bytes.
type relay struct {
	lis    net.Listener
	next   net.Conn // nil for the last replica
	path   string
	files  bool
	splice bool
	done   chan error
}

func (r *relay) serve() {
	conn, err := r.lis.Accept()
	if err != nil {
		r.done <- err
		return
	}
	defer conn.Close()
	var f *os.File
	if r.files {
		if f, err = os.Create(r.path); err != nil {
			r.done <- err
			return
		}
		defer f.Close()
	}
	if r.splice && f != nil {
		r.done <- r.spliceToFile(conn, f)
		return
	}
	if r.splice && r.next != nil {
		n, err := io.CopyN(r.next, conn, benchChunk)
		if err == nil && n != benchChunk {
			err = io.ErrUnexpectedEOF
		}
		r.done <- err
		return
	}
	buf := make([]byte, 1<<20)
	var off int64
	for off < benchChunk {
		n, err := conn.Read(buf)
		if n > 0 {
			if r.next != nil {
				if _, err := r.next.Write(buf[:n]); err != nil {
					r.done <- err
					return
				}
			}
			if f != nil {
				if _, err := f.WriteAt(buf[:n], off); err != nil {
					r.done <- err
					return
				}
			}
			off += int64(n)
		}
		if err != nil {
			if err == io.EOF && off == benchChunk {
				break
			}
			r.done <- err
			return
		}
	}
	r.done <- nil
}

func benchFloorMode(b *testing.B, files, splice bool) {
	relays := make([]*relay, 3)
	for i := range relays {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { lis.Close() })
		relays[i] = &relay{lis: lis, path: filepath.Join(benchDir(b), "chunk"), files: files, splice: splice, done: make(chan error, 1)}
	}
	data := randBytes(rand.New(rand.NewPCG(4, 4)), benchOp)
	var conns []net.Conn
	timed(b, func(i int) {
		// New connections and files every iteration, as a new chunk
		// would have; the old files go first so the memory is free.
		for _, c := range conns {
			c.Close()
		}
		conns = conns[:0]
		for _, r := range relays {
			if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				b.Fatal(err)
			}
		}
		for k := len(relays) - 1; k >= 0; k-- {
			go relays[k].serve()
			if k == 0 {
				break
			}
			c, err := net.Dial("tcp", relays[k].lis.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			relays[k-1].next = c
			conns = append(conns, c)
		}
	}, func(int) {
		c, err := net.Dial("tcp", relays[0].lis.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off < benchChunk; off += benchOp {
			if _, err := c.Write(data); err != nil {
				b.Fatal(err)
			}
		}
		c.Close()
		for _, r := range relays {
			if err := <-r.done; err != nil {
				b.Fatal(err)
			}
		}
	})
}

// spliceToFile moves benchChunk bytes from conn into f, and on to r.next
// if there is one, with splice and tee only.
func (r *relay) spliceToFile(conn net.Conn, f *os.File) error {
	in, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		return err
	}
	var out syscall.RawConn
	if r.next != nil {
		if out, err = r.next.(*net.TCPConn).SyscallConn(); err != nil {
			return err
		}
	}
	var toFile, toNext [2]int
	for _, p := range []*[2]int{&toFile, &toNext} {
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			return err
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, 1<<20)
	}
	const flags = unix.SPLICE_F_MOVE | unix.SPLICE_F_NONBLOCK
	var off int64
	for off < benchChunk {
		var n int64
		var serr error
		if err := in.Read(func(fd uintptr) bool {
			n, serr = unix.Splice(int(fd), nil, toFile[1], nil, int(min(1<<20, benchChunk-off)), flags)
			return serr != unix.EAGAIN
		}); err != nil {
			return err
		}
		if serr != nil {
			return serr
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		if out != nil {
			for teed := int64(0); teed < n; {
				k, err := unix.Tee(toFile[0], toNext[1], int(n-teed), 0)
				if err != nil {
					return err
				}
				teed += k
				for sent := int64(0); sent < k; {
					var m int64
					if err := out.Write(func(fd uintptr) bool {
						m, serr = unix.Splice(toNext[0], nil, int(fd), nil, int(k-sent), flags)
						return serr != unix.EAGAIN
					}); err != nil {
						return err
					}
					if serr != nil {
						return serr
					}
					sent += m
				}
			}
		}
		for stored := int64(0); stored < n; {
			k, err := unix.Splice(toFile[0], nil, int(f.Fd()), &off, int(n-stored), unix.SPLICE_F_MOVE)
			if err != nil {
				return err
			}
			stored += k
		}
	}
	return nil
}
