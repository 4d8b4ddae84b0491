package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
)

// oddServer answers every read on its connections with the chunk data
// cut into frames of the lengths frames returns, and writes its bytes in
// pieces of random sizes, so that a client's scatter reads see frames
// the layout does not expect and headers split between reads. When
// corrupt is not negative, that frame's payload is damaged; when after is
// not nil, it is sent after the answer's end.
type oddServer struct {
	data    []byte
	frames  func(off, n int) []int
	corrupt int
	after   []byte
}

func (s *oddServer) start(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			go s.serve(conn)
		}
	}()
	return lis.Addr().String()
}

func (s *oddServer) serve(conn net.Conn) {
	defer conn.Close()
	rng := rand.New(rand.NewPCG(uint64(len(s.data)), 5))
	if _, err := io.ReadFull(conn, make([]byte, len(StreamMagic))); err != nil {
		return
	}
	for {
		req := make([]byte, frameHeaderSize+28)
		if _, err := io.ReadFull(conn, req); err != nil {
			return
		}
		off := int(binary.LittleEndian.Uint64(req[frameHeaderSize+16:]))
		asked := int(binary.LittleEndian.Uint32(req[frameHeaderSize+24:]))
		n := min(asked, len(s.data)-off)
		var out []byte
		for i, l := range s.frames(off, n) {
			f := appendFrame(nil, frameData, s.data[off:off+l])
			if i == s.corrupt {
				f[len(f)-1] ^= 1
			}
			out = append(out, f...)
			off += l
		}
		end := byte(0)
		if n < asked {
			end = 1
		}
		out = appendFrame(out, frameOK, []byte{end})
		out = append(out, s.after...)
		for len(out) > 0 {
			k := min(len(out), 1+rng.IntN(100<<10))
			if rng.IntN(4) == 0 {
				k = min(len(out), 1+rng.IntN(20)) // split a header
			}
			if _, err := conn.Write(out[:k]); err != nil {
				return
			}
			out = out[k:]
		}
	}
}

// TestReadScatterLayouts reads through servers framing their answers in
// ways the client's scatter reads do not expect: the data must arrive
// exact, a damaged frame must fail in transit, and bytes after an answer
// must fail the read.
func TestReadScatterLayouts(t *testing.T) {
	data := testData(3<<20+12345, 7)
	block := func(off, n int) []int { // what sendFrames does
		var ls []int
		for n > 0 {
			l := min(n, frameLen(int64(off)))
			ls, off, n = append(ls, l), off+l, n-l
		}
		return ls
	}
	fixed := func(size int) func(int, int) []int {
		return func(_, n int) []int {
			var ls []int
			for ; n > 0; n -= min(n, size) {
				ls = append(ls, min(n, size))
			}
			return ls
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(_, n int) []int {
		var ls []int
		for n > 0 {
			l := min(n, rng.IntN(chunkfs.MaxFrameSize+1))
			ls, n = append(ls, l), n-l
		}
		return ls
	}
	reads := []struct{ off, n int }{
		{0, 1 << 20}, {0, len(data)}, {777, 2 << 20}, {65536, 3 << 20}, {len(data) - 100000, 1 << 20}, {5, 1},
	}
	for name, frames := range map[string]func(int, int) []int{"blocks": block, "64KiB from off": fixed(64 << 10), "1000": fixed(1000), "random": random} {
		addr := (&oddServer{data: data, frames: frames, corrupt: -1}).start(t)
		c := NewDataClient()
		for _, r := range reads {
			p := make([]byte, r.n)
			n, err := c.Read(context.Background(), addr, 1, 1, int64(r.off), p)
			want := min(r.n, len(data)-r.off)
			if n != want || !bytes.Equal(p[:n], data[r.off:r.off+want]) {
				t.Fatalf("%s: read %d at %d: got %d bytes (err %v), want %d exact", name, r.n, r.off, n, err, want)
			}
			if (want < r.n) != (err == io.EOF) || (err != nil && err != io.EOF) {
				t.Fatalf("%s: read %d at %d: err %v", name, r.n, r.off, err)
			}
		}
		c.Close()
	}
	for _, corrupt := range []int{0, 1, 7, 40} {
		addr := (&oddServer{data: data, frames: block, corrupt: corrupt}).start(t)
		c := NewDataClient()
		_, err := c.Read(context.Background(), addr, 1, 1, 0, make([]byte, 3<<20))
		if chunkfs.KindOf(err) != chunkfs.KindChecksum || !InTransit(err) {
			t.Fatalf("frame %d damaged: %v, want KindChecksum in transit", corrupt, err)
		}
		c.Close()
	}
	addr := (&oddServer{data: data, frames: block, corrupt: -1, after: appendFrame(nil, frameOK, []byte{0})}).start(t)
	c := NewDataClient()
	defer c.Close()
	if _, err := c.Read(context.Background(), addr, 1, 1, 0, make([]byte, 100)); err == nil {
		// The extra frame may arrive after the answer was taken; then
		// the next read on the connection sees it.
		if _, err := c.Read(context.Background(), addr, 1, 1, 0, make([]byte, 100)); err == nil {
			t.Fatal("bytes after an answer were not noticed")
		}
	}
}

// FuzzReceiveRead feeds arbitrary bytes to a client as the answer to a
// read: it must never panic, fill more than it asked for, or succeed short.
func FuzzReceiveRead(f *testing.F) {
	answer := func(off, n int, frames func(int, int) []int) []byte {
		data := testData(off+n, 4)
		var out []byte
		for _, l := range frames(off, n) {
			out = appendFrame(out, frameData, data[off:off+l])
			off += l
		}
		return appendFrame(out, frameOK, []byte{0})
	}
	blocks := func(off, n int) []int {
		var ls []int
		for n > 0 {
			l := min(n, frameLen(int64(off)))
			ls, off, n = append(ls, l), off+l, n-l
		}
		return ls
	}
	f.Add(uint32(0), uint32(100), answer(0, 100, blocks))
	f.Add(uint32(65000), uint32(200000), answer(65000, 200000, blocks))
	f.Add(uint32(0), uint32(3000), answer(0, 3000, func(_, n int) []int { return []int{1000, 1000, 1000} }))
	f.Add(uint32(10), uint32(70000), appendFrame(nil, frameError, []byte{byte(3), 'x'}))
	f.Fuzz(func(t *testing.T, off, n uint32, a []byte) {
		n %= 1 << 20
		if n == 0 {
			return
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		go func() {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			io.ReadFull(conn, make([]byte, len(StreamMagic)+frameHeaderSize+28))
			conn.Write(a)
		}()
		c := NewDataClient()
		defer c.Close()
		p := make([]byte, n)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := c.Read(ctx, lis.Addr().String(), 1, 1, int64(off), p)
		if ctx.Err() != nil {
			t.Fatalf("read %d at %d hangs on an answer of %d bytes: %v", n, off, len(a), err)
		}
		if got > int(n) || (err == nil && got != int(n)) {
			t.Fatalf("read %d: got %d, err %v", n, got, err)
		}
	})
}
