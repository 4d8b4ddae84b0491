package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
	"github.com/chunkfs/chunkfs/internal/reqid"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// memHandler is a StreamHandler over memory, for tests of the stream alone.
type memHandler struct {
	mu     sync.Mutex // guards pushed and chunks
	pushed map[chunkfs.DataID][]byte
	chunks map[chunkfs.Handle]memChunk
}

type memChunk struct {
	version chunkfs.Version
	data    []byte
	corrupt bool
}

func newMemHandler() *memHandler {
	return &memHandler{pushed: map[chunkfs.DataID][]byte{}, chunks: map[chunkfs.Handle]memChunk{}}
}

func (m *memHandler) BeginPush(id chunkfs.DataID, n int64) ([]byte, func([]uint32, bool), error) {
	buf := make([]byte, n)
	return buf, func(sums []uint32, ok bool) {
		if ok && (len(sums) != int(checksum.NumBlocks(n)) || checksum.Verify(buf, sums) != nil) {
			panic("push sums are not the block sums of the data")
		}
		if ok {
			m.mu.Lock()
			m.pushed[id] = buf
			m.mu.Unlock()
		}
	}, nil
}

func (m *memHandler) get(id chunkfs.DataID) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pushed[id]
}

func (m *memHandler) ReadChunk(h chunkfs.Handle, v chunkfs.Version, off int64, p []byte, sums []uint32) (int, []uint32, error) {
	m.mu.Lock()
	c, ok := m.chunks[h]
	m.mu.Unlock()
	switch {
	case !ok:
		return 0, sums, chunkfs.E("read", "", chunkfs.KindNotExist, "no such chunk")
	case c.version < v:
		return 0, sums, chunkfs.E("read", "", chunkfs.KindStale, "")
	case c.corrupt:
		return 0, sums, checksum.ErrChecksum
	case off >= int64(len(c.data)):
		return 0, sums, io.EOF
	}
	n := copy(p, c.data[off:])
	if off%chunkfs.BlockSize == 0 {
		whole := n / chunkfs.BlockSize * chunkfs.BlockSize
		if off+int64(n) == int64(len(c.data)) {
			whole = n
		}
		sums = checksum.Blocks(sums, p[:whole])
	}
	if n < len(p) {
		return n, sums, io.EOF
	}
	return n, sums, nil
}

// startStream serves h on a loopback listener through a Mux, with a gRPC
// server beside it.
func startStream(t testing.TB, h StreamHandler) (addr string, srv *StreamServer) {
	t.Helper()
	return startStreamTimeout(t, h, 5*time.Second)
}

// listenStream makes a stream server for h and a loopback listener for
// it, with frames timed out after 5 s, no logging, and whatever tune
// changes.
func listenStream(t testing.TB, h StreamHandler, tune func(*StreamConfig)) (net.Listener, *StreamServer, StreamConfig) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultStreamConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.FrameTimeout = 5 * time.Second
	tune(&cfg)
	srv, err := NewStreamServer(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return lis, srv, cfg
}

// startStreamBare serves h on a listener of its own (no Mux), configured
// as listenStream does.
func startStreamBare(t testing.TB, h StreamHandler, tune func(*StreamConfig)) (addr string, srv *StreamServer) {
	t.Helper()
	lis, srv, cfg := listenStream(t, h, tune)
	go srv.Serve(lis)
	t.Cleanup(func() {
		lis.Close()
		srv.Close()
		cfg.Client.Close()
	})
	return lis.Addr().String(), srv
}

// startStreamTimeout is startStream with the given frame timeout.
func startStreamTimeout(t testing.TB, h StreamHandler, frameTimeout time.Duration) (addr string, srv *StreamServer) {
	t.Helper()
	lis, srv, cfg := listenStream(t, h, func(c *StreamConfig) { c.FrameTimeout = frameTimeout })
	mux := NewMux(lis, cfg.Logger)
	gs := NewServer(cfg.Logger)
	pb.RegisterChunkServerServer(gs, pb.UnimplementedChunkServerServer{})
	go mux.Serve()
	go srv.Serve(mux.Data())
	go gs.Serve(mux.GRPC())
	t.Cleanup(func() {
		mux.Close()
		gs.Stop()
		srv.Close()
		cfg.Client.Close()
	})
	return lis.Addr().String(), srv
}

func testData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 9))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

func TestPushChain(t *testing.T) {
	hs := []*memHandler{newMemHandler(), newMemHandler(), newMemHandler()}
	var chain []string
	for _, h := range hs {
		a, _ := startStream(t, h)
		chain = append(chain, a)
	}
	c := NewDataClient()
	defer c.Close()
	for i, n := range []int{0, 1, chunkfs.MaxFrameSize, 5*chunkfs.MaxFrameSize + 3, 4 << 20} {
		data := testData(n, uint64(i))
		if err := c.Push(context.Background(), chain, chunkfs.DataID(i+1), data); err != nil {
			t.Fatalf("push %d bytes: %v", n, err)
		}
		for j, h := range hs {
			if got := h.get(chunkfs.DataID(i + 1)); !bytes.Equal(got, data) {
				t.Fatalf("push %d bytes: replica %d holds %d bytes, not the data", n, j, len(got))
			}
		}
	}
}

func TestPushChainReportsDownstreamFailure(t *testing.T) {
	a, _ := startStream(t, newMemHandler())
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	c := NewDataClient()
	defer c.Close()
	err := c.Push(context.Background(), []string{a, deadAddr}, 1, testData(200000, 1))
	if chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("push to a chain with a dead replica: %v, want KindUnavailable", err)
	}
	// The connection to a stays usable.
	if err := c.Push(context.Background(), []string{a}, 2, []byte("x")); err != nil {
		t.Fatal(err)
	}
}

// TestPushCutThrough shows that a replica forwards frames before the push is
// complete: the last hop, a bare listener, sees the first frame while the
// client still holds back the second. Store-and-forward would deadlock.
func TestPushCutThrough(t *testing.T) {
	a, _ := startStream(t, newMemHandler())
	b, _ := startStream(t, newMemHandler())
	last, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer last.Close()
	frame1, frame2 := testData(chunkfs.MaxFrameSize, 1), testData(100, 2)
	firstSeen := make(chan []byte, 1)
	secondSeen := make(chan []byte, 1)
	go func() {
		conn, err := last.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		io.ReadFull(r, make([]byte, 4))
		var hdr [frameHeaderSize]byte
		h, _ := readHeader(r, hdr[:])
		io.ReadFull(r, make([]byte, h.length))
		for _, ch := range []chan []byte{firstSeen, secondSeen} {
			h, _ := readHeader(r, hdr[:])
			p := make([]byte, h.length)
			io.ReadFull(r, p)
			ch <- p
		}
		conn.Write(appendFrame(nil, frameOK, nil))
	}()
	conn, err := net.Dial("tcp", a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := (&pushRequest{id: 7, length: int64(len(frame1) + len(frame2)), chain: []string{b, last.Addr().String()}}).encode()
	conn.Write(append([]byte(StreamMagic), appendFrame(nil, framePush, req)...))
	conn.Write(appendFrame(nil, frameData, frame1))
	select {
	case p := <-firstSeen:
		if !bytes.Equal(p, frame1) {
			t.Fatal("first frame altered on the way")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("first frame did not reach the end of the chain before the push was complete")
	}
	conn.Write(appendFrame(nil, frameData, frame2))
	if p := <-secondSeen; !bytes.Equal(p, frame2) {
		t.Fatal("second frame altered")
	}
	var hdr [frameHeaderSize]byte
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if h, err := readHeader(conn, hdr[:]); err != nil || h.typ != frameOK {
		t.Fatalf("answer: %v %v", h.typ, err)
	}
}

func TestRead(t *testing.T) {
	h := newMemHandler()
	data := testData(3*chunkfs.BlockSize+77, 3)
	h.chunks[1] = memChunk{version: 5, data: data}
	h.chunks[2] = memChunk{version: 5, data: data, corrupt: true}
	addr, _ := startStream(t, h)
	c := NewDataClient()
	defer c.Close()
	ctx := context.Background()
	for _, tc := range []struct{ off, n int }{{0, len(data)}, {10, 1000}, {chunkfs.BlockSize, 2 * chunkfs.BlockSize}, {5, len(data)}, {len(data), 10}} {
		p := make([]byte, tc.n)
		n, err := c.Read(ctx, addr, 1, 5, int64(tc.off), p)
		want := data[min(tc.off, len(data)):min(tc.off+tc.n, len(data))]
		if !bytes.Equal(p[:n], want) {
			t.Fatalf("Read(%d, %d) = %d bytes, not the data", tc.off, tc.n, n)
		}
		if (n < tc.n) != (err == io.EOF) || (n == tc.n && err != nil) {
			t.Fatalf("Read(%d, %d) = %d, %v", tc.off, tc.n, n, err)
		}
	}
	for _, tc := range []struct {
		h    chunkfs.Handle
		v    chunkfs.Version
		kind chunkfs.Kind
	}{{1, 6, chunkfs.KindStale}, {3, 1, chunkfs.KindNotExist}, {2, 1, chunkfs.KindChecksum}} {
		_, err := c.Read(ctx, addr, tc.h, tc.v, 0, make([]byte, 10))
		if chunkfs.KindOf(err) != tc.kind {
			t.Errorf("Read(chunk %d v%d) = %v, want %v", tc.h, tc.v, err, tc.kind)
		}
	}
	if _, err := c.Read(ctx, "127.0.0.1:1", 1, 1, 0, make([]byte, 1)); chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Errorf("read from nowhere: %v", err)
	}
}

// TestReadDetectsCorruptFrame checks the client side: a frame whose payload
// does not match its checksum fails the read with KindChecksum.
func TestReadDetectsCorruptFrame(t *testing.T) {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	defer lis.Close()
	go func() {
		conn, err := lis.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		io.ReadFull(conn, make([]byte, 4+frameHeaderSize+28))
		f := appendFrame(nil, frameData, []byte("hello"))
		f[frameHeaderSize] ^= 1
		conn.Write(f)
		io.Copy(io.Discard, conn)
	}()
	c := NewDataClient()
	defer c.Close()
	_, err := c.Read(context.Background(), lis.Addr().String(), 1, 1, 0, make([]byte, 5))
	if chunkfs.KindOf(err) != chunkfs.KindChecksum || !InTransit(err) {
		t.Fatalf("corrupt frame: %v, want KindChecksum in transit", err)
	}
}

func TestReadHonoursContext(t *testing.T) {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	defer lis.Close()
	go func() {
		conn, err := lis.Accept()
		if err == nil {
			defer conn.Close()
			io.Copy(io.Discard, conn) // never answers
		}
	}()
	c := NewDataClient()
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	_, err := c.Read(ctx, lis.Addr().String(), 1, 1, 0, make([]byte, 5))
	if chunkfs.KindOf(err) != chunkfs.KindUnavailable || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read: %v", err)
	}
}

// TestHostileFramesCloseConnection sends broken input; each connection is
// closed by the server, which keeps serving others.
func TestHostileFramesCloseConnection(t *testing.T) {
	h := newMemHandler()
	addr, _ := startStream(t, h)
	good := appendFrame(nil, frameRead, (&readRequest{handle: 1, length: 1}).encode())
	badSum := bytes.Clone(good)
	badSum[frameHeaderSize+3] ^= 1
	huge := bytes.Clone(good)
	binary.LittleEndian.PutUint32(huge[4:], chunkfs.MaxFrameSize+1)
	unknown := bytes.Clone(good)
	unknown[0] = 99
	hugePush := appendFrame(nil, framePush, binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 1), 1<<40))
	for name, input := range map[string][]byte{
		"bad magic":      []byte("XXXXhello"),
		"bad checksum":   append([]byte(StreamMagic), badSum...),
		"oversized":      append([]byte(StreamMagic), huge...),
		"unknown type":   append([]byte(StreamMagic), unknown...),
		"huge push":      append([]byte(StreamMagic), hugePush...),
		"data first":     append([]byte(StreamMagic), appendFrame(nil, frameData, []byte("x"))...),
		"short read req": append([]byte(StreamMagic), appendFrame(nil, frameRead, []byte("x"))...),
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(input)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := io.Copy(io.Discard, conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || n != 0 {
			t.Errorf("%s: connection not closed cleanly: read %d bytes, %v", name, n, err)
		}
		conn.Close()
	}
	c := NewDataClient()
	defer c.Close()
	if err := c.Push(context.Background(), []string{addr}, 1, []byte("still serving")); err != nil {
		t.Fatalf("server no longer serves: %v", err)
	}
}

func TestMuxServesGRPCAndData(t *testing.T) {
	addr, _ := startStream(t, newMemHandler())
	cc, err := Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = pb.NewChunkServerClient(cc).ChunkInfo(context.Background(), &pb.ChunkInfoRequest{})
	if st, _ := status.FromError(err); chunkfs.KindOf(err) != chunkfs.KindNotSupported && st.Code() != codes.Unimplemented {
		t.Fatalf("gRPC through the mux: %v", err)
	}
	c := NewDataClient()
	defer c.Close()
	if err := c.Push(context.Background(), []string{addr}, 1, []byte("x")); err != nil {
		t.Fatalf("data through the mux: %v", err)
	}
}

func FuzzDecodeRequests(f *testing.F) {
	p, _ := (&pushRequest{id: 1, length: 10, chain: []string{"127.0.0.1:1"}}).encode()
	f.Add(p)
	f.Add((&readRequest{handle: 1, version: 2, off: 3, length: 4}).encode())
	p, _ = (&pushRequest{id: 1, length: 10, token: bytes.Repeat([]byte{7}, 90)}).encode()
	f.Add(p)
	f.Add((&readRequest{handle: 1, version: 2, off: 3, length: 4, token: bytes.Repeat([]byte{7}, 90)}).encode())
	f.Add(encodeError(chunkfs.E("x", "", chunkfs.KindStale, "m")))
	p, _ = (&pushRequest{id: 1, length: 10, chain: []string{"127.0.0.1:1"}, reqID: "0123456789abcdef"}).encode()
	f.Add(p)
	f.Add((&readRequest{handle: 1, length: 4, token: []byte("tok"), reqID: "r-1"}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodePush(b); err == nil {
			again, err := r.encode()
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("push %+v does not re-encode: %v", r, err)
			}
		}
		if r, err := decodeRead(b); err == nil {
			if r.off < 0 || r.length > MaxReadSize || len(r.token) > MaxTokenLen || (r.reqID != "" && !reqid.Valid(r.reqID)) {
				t.Fatalf("bad read accepted: %+v", r)
			}
			if again := r.encode(); !bytes.Equal(again, b) {
				t.Fatalf("read %+v does not re-encode", r)
			}
		}
		decodeError("op", "", b)
		if len(b) >= frameHeaderSize {
			if h, err := parseHeader(b); err == nil && h.length > chunkfs.MaxFrameSize {
				t.Fatal("oversized frame accepted")
			}
		}
	})
}

// FuzzServeConn feeds arbitrary bytes to a server connection: it must end
// without panicking and without reading past what it was given.
func FuzzServeConn(f *testing.F) {
	push, _ := (&pushRequest{id: 1, length: 3}).encode()
	f.Add(append(append([]byte(StreamMagic), appendFrame(nil, framePush, push)...), appendFrame(nil, frameData, []byte("abc"))...))
	f.Add(append([]byte(StreamMagic), appendFrame(nil, frameRead, (&readRequest{handle: 1, length: 10}).encode())...))
	f.Add(append([]byte(StreamMagic), appendFrame(nil, frameRead, (&readRequest{handle: 1, length: 10, token: []byte("tok")}).encode())...))
	cfg := DefaultStreamConfig()
	cfg.Authorize = func(r StreamRequest) error {
		if len(r.Token) == 0 {
			return chunkfs.E("stream", "", chunkfs.KindPermission, "permission denied: no chunk access token")
		}
		return nil
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.FrameTimeout = time.Second
	cfg.IdleTimeout = time.Second
	h := newMemHandler()
	h.chunks[1] = memChunk{version: 1, data: testData(1000, 1)}
	srv, _ := NewStreamServer(h, cfg)
	f.Fuzz(func(t *testing.T, in []byte) {
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			srv.ServeConn(server)
			close(done)
		}()
		go io.Copy(io.Discard, client)
		client.Write(in)
		client.Close()
		<-done
	})
}

// TestPushForwardsWithinFrame shows that a replica forwards a frame's
// payload before the whole frame has arrived: the next hop, a bare
// listener, sees the header and a first piece while the client still holds
// back the rest of the frame.
func TestPushForwardsWithinFrame(t *testing.T) {
	a, _ := startStream(t, newMemHandler())
	last, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer last.Close()
	frame := testData(chunkfs.MaxFrameSize, 3)
	pieceSeen := make(chan []byte, 1)
	restSeen := make(chan []byte, 1)
	go func() {
		conn, err := last.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		io.ReadFull(r, make([]byte, 4))
		var hdr [frameHeaderSize]byte
		h, _ := readHeader(r, hdr[:])
		io.ReadFull(r, make([]byte, h.length))
		h, _ = readHeader(r, hdr[:])
		p := make([]byte, h.length)
		io.ReadFull(r, p[:forwardPiece])
		pieceSeen <- p[:forwardPiece]
		io.ReadFull(r, p[forwardPiece:])
		restSeen <- p
		conn.Write(appendFrame(nil, frameOK, nil))
	}()
	conn, err := net.Dial("tcp", a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := (&pushRequest{id: 8, length: int64(len(frame)), chain: []string{last.Addr().String()}}).encode()
	conn.Write(append([]byte(StreamMagic), appendFrame(nil, framePush, req)...))
	whole := appendFrame(nil, frameData, frame)
	half := frameHeaderSize + len(frame)/2
	conn.Write(whole[:half])
	select {
	case p := <-pieceSeen:
		if !bytes.Equal(p, frame[:forwardPiece]) {
			t.Fatal("first piece altered on the way")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no piece of the frame reached the next hop before the frame was complete")
	}
	conn.Write(whole[half:])
	if p := <-restSeen; !bytes.Equal(p, frame) {
		t.Fatal("frame altered on the way")
	}
	var hdr [frameHeaderSize]byte
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if h, err := readHeader(conn, hdr[:]); err != nil || h.typ != frameOK {
		t.Fatalf("answer: %v %v", h.typ, err)
	}
}

// TestPushBadFrameReported: a data frame failing its checksum, already
// forwarded down the chain, fails the push with KindChecksum in the final
// answer; no replica keeps the data, and the connection stays in step for
// the next push.
func TestPushBadFrameReported(t *testing.T) {
	ha, hb := newMemHandler(), newMemHandler()
	a, _ := startStream(t, ha)
	b, _ := startStream(t, hb)
	conn, err := net.Dial("tcp", a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte(StreamMagic))
	r := bufio.NewReader(conn)
	push := func(id chunkfs.DataID, corrupt bool) (frameHeader, []byte) {
		t.Helper()
		data := testData(3*chunkfs.MaxFrameSize/2, uint64(id))
		req, _ := (&pushRequest{id: id, length: int64(len(data)), chain: []string{b}}).encode()
		out := appendFrame(nil, framePush, req)
		out = appendFrame(out, frameData, data[:chunkfs.MaxFrameSize])
		if corrupt {
			out[len(out)-100] ^= 0x40 // after the sum was taken
		}
		out = appendFrame(out, frameData, data[chunkfs.MaxFrameSize:])
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(out); err != nil {
			t.Fatal(err)
		}
		var hdr [frameHeaderSize]byte
		h, err := readHeader(r, hdr[:])
		if err != nil {
			t.Fatalf("push %d: no answer: %v", id, err)
		}
		payload := make([]byte, h.length)
		if _, err := io.ReadFull(r, payload); err != nil {
			t.Fatal(err)
		}
		return h, payload
	}
	h, payload := push(1, true)
	if h.typ != frameError || chunkfs.KindOf(decodeError("push", "", payload)) != chunkfs.KindChecksum {
		t.Fatalf("corrupt push answered %v %v, want a KindChecksum error", h.typ, decodeError("push", "", payload))
	}
	if ha.get(1) != nil || hb.get(1) != nil {
		t.Fatal("a replica kept a push with a corrupt frame")
	}
	if h, _ := push(2, false); h.typ != frameOK {
		t.Fatalf("next push on the same connection answered %v", h.typ)
	}
	if ha.get(2) == nil || hb.get(2) == nil {
		t.Fatal("the good push is missing on a replica")
	}
}

// fakeHop is the last replica of a chain played by the test: it takes one
// push, reads its data, and then calls answer with the connection.
func fakeHop(t *testing.T, answer func(net.Conn)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		lis.Close()
		<-done
	})
	go func() {
		defer close(done)
		conn, err := lis.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		var hdr [frameHeaderSize]byte
		io.ReadFull(r, hdr[:len(StreamMagic)])
		h, err := readHeader(r, hdr[:])
		if err != nil {
			return
		}
		p := make([]byte, h.length)
		io.ReadFull(r, p)
		req, err := decodePush(p)
		if err != nil {
			return
		}
		for got := 0; got < int(req.length); {
			h, err := readHeader(r, hdr[:])
			if err != nil {
				return
			}
			io.ReadFull(r, make([]byte, h.length))
			got += h.length
		}
		answer(conn)
	}()
	return lis.Addr().String()
}

// waitThenAnswer sends wait frames every interval for total, then t.
func waitThenAnswer(interval, total time.Duration, typ frameType) func(net.Conn) {
	return func(conn net.Conn) {
		for start := time.Now(); time.Since(start) < total; time.Sleep(interval) {
			if _, err := conn.Write(appendFrame(nil, frameWait, nil)); err != nil {
				return
			}
		}
		conn.Write(appendFrame(nil, typ, nil))
	}
}

// TestPushWaitsWhileChainIsAlive: a replica whose next hop takes longer
// than its frame timeout to answer, but sends wait frames meanwhile, waits
// for the answer and sends wait frames upstream itself, so a push through a
// congested chain succeeds however long it takes to drain.
func TestPushWaitsWhileChainIsAlive(t *testing.T) {
	const frameTimeout = 600 * time.Millisecond
	h := newMemHandler()
	a, _ := startStreamTimeout(t, h, frameTimeout)
	last := fakeHop(t, waitThenAnswer(frameTimeout/4, 4*frameTimeout, frameOK))
	conn, err := net.Dial("tcp", a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	data := testData(100_000, 5)
	req, _ := (&pushRequest{id: 9, length: int64(len(data)), chain: []string{last}}).encode()
	conn.Write(append(append([]byte(StreamMagic), appendFrame(nil, framePush, req)...), appendFrame(nil, frameData, data[:chunkfs.MaxFrameSize])...))
	conn.Write(appendFrame(nil, frameData, data[chunkfs.MaxFrameSize:]))
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(conn)
	waits := 0
	for {
		var hdr [frameHeaderSize]byte
		fh, err := readHeader(r, hdr[:])
		if err != nil {
			t.Fatalf("answer after %d wait frames: %v", waits, err)
		}
		if fh.typ == frameWait {
			waits++
			continue
		}
		if fh.typ != frameOK {
			p := make([]byte, fh.length)
			io.ReadFull(r, p)
			t.Fatalf("answer after %d wait frames: %v frame: %v", waits, fh.typ, decodeError("push", a, p))
		}
		break
	}
	// The answer took 4 frame timeouts; the replica waits every third of one.
	if waits < 6 {
		t.Errorf("%d wait frames upstream while the chain drained, want ≥ 6", waits)
	}
	if !bytes.Equal(h.get(9), data) {
		t.Error("replica does not hold the data")
	}
}

// TestPushClientSkipsWaitFrames: the client pushing to a chain that answers
// late, after wait frames, gets its success; a chain that goes silent for
// a frame timeout fails the push, and the client gets KindUnavailable.
func TestPushClientSkipsWaitFrames(t *testing.T) {
	const frameTimeout = 600 * time.Millisecond
	a, _ := startStreamTimeout(t, newMemHandler(), frameTimeout)
	c := NewDataClient()
	defer c.Close()
	alive := fakeHop(t, waitThenAnswer(frameTimeout/4, 3*frameTimeout, frameOK))
	if err := c.Push(context.Background(), []string{a, alive}, 1, testData(200_000, 1)); err != nil {
		t.Fatalf("push through a chain that sent wait frames: %v", err)
	}
	release := make(chan struct{})
	silent := fakeHop(t, func(net.Conn) { <-release })
	defer close(release)
	start := time.Now()
	err := c.Push(context.Background(), []string{a, silent}, 2, testData(200_000, 2))
	if chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("push through a silent chain: %v, want KindUnavailable", err)
	}
	if d := time.Since(start); d < frameTimeout {
		t.Errorf("silent chain failed after %v, before the frame timeout %v", d, frameTimeout)
	}
}

// TestReadAfterPushToLastReplica: the last replica of a chain (here the
// only one) stops its wait frames once it has answered the push, so the
// pooled connection it came on serves a read later — as a chunkserver's
// does when it clones from a server it once forwarded a push to.
func TestReadAfterPushToLastReplica(t *testing.T) {
	const frameTimeout = 300 * time.Millisecond
	h := newMemHandler()
	data := testData(2*chunkfs.BlockSize, 7)
	h.chunks[1] = memChunk{version: 1, data: data}
	a, _ := startStreamTimeout(t, h, frameTimeout)
	c := NewDataClient()
	defer c.Close()
	ctx := context.Background()
	if err := c.Push(ctx, []string{a}, 1, testData(100_000, 1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * frameTimeout) // a stray wait frame would be due every third of it
	p := make([]byte, len(data))
	if n, err := c.Read(ctx, a, 1, 1, 0, p); err != nil && err != io.EOF || !bytes.Equal(p[:n], data) {
		t.Fatalf("read on the push's connection: %d bytes, %v", n, err)
	}
}
