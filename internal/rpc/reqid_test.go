package rpc

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/reqid"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"google.golang.org/grpc/metadata"
)

// logBuffer is a goroutine-safe log sink at debug level.
type logBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// linesWith returns the lines of l that contain every one of subs.
func (l *logBuffer) linesWith(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		all := line != ""
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// idMaster answers Stat, noting the request ID its handler's context had.
type idMaster struct {
	pb.UnimplementedMasterServer
	mu   sync.Mutex // guards seen
	seen []string
}

func (m *idMaster) Stat(ctx context.Context, req *pb.StatRequest) (*pb.StatResponse, error) {
	m.mu.Lock()
	m.seen = append(m.seen, reqid.From(ctx))
	m.mu.Unlock()
	return &pb.StatResponse{}, nil
}

func TestRequestIDCrossesGRPC(t *testing.T) {
	var logs logBuffer
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &idMaster{}
	srv := NewServer(logs.logger())
	pb.RegisterMasterServer(srv, m)
	go srv.Serve(ln)
	defer srv.Stop()
	conn, err := Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mc := pb.NewMasterClient(conn)
	ctx := context.Background()
	// A well-formed ID from the context, none, and malformed ones set
	// straight in the metadata: the malformed are ignored, the calls served.
	calls := []struct {
		ctx  context.Context
		want string
	}{
		{reqid.With(ctx, "a1b2-c3_d4.e5"), "a1b2-c3_d4.e5"},
		{ctx, ""},
		{metadata.AppendToOutgoingContext(ctx, reqIDHeader, "bad id"), ""},
		{metadata.AppendToOutgoingContext(ctx, reqIDHeader, strings.Repeat("x", reqid.MaxLen+1)), ""},
		{metadata.AppendToOutgoingContext(ctx, reqIDHeader, "one", reqIDHeader, "two"), ""},
		{metadata.AppendToOutgoingContext(ctx, reqIDHeader, ""), ""},
	}
	for i, c := range calls {
		if _, err := mc.Stat(c.ctx, &pb.StatRequest{Path: "/"}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := m.seen[i]; got != c.want {
			t.Errorf("call %d: handler saw ID %q, want %q", i, got, c.want)
		}
	}
	if lines := logs.linesWith("msg=rpc", "method=Stat", "req=a1b2-c3_d4.e5"); len(lines) != 1 {
		t.Errorf("want one debug line for the call with an ID, got %q", logs.String())
	}
	if n := len(logs.linesWith("msg=rpc")); n != 1 {
		t.Errorf("%d rpc lines, want 1 (calls without an ID are not logged): %q", n, logs.String())
	}
}

// startStreamLogged is startStream logging at debug level into logs.
func startStreamLogged(t *testing.T, h StreamHandler, logs *logBuffer) string {
	t.Helper()
	addr, _ := startStreamBare(t, h, func(c *StreamConfig) { c.Logger = logs.logger() })
	return addr
}

func TestRequestIDTravelsDownThePushChain(t *testing.T) {
	logs := make([]logBuffer, 3)
	hs := []*memHandler{newMemHandler(), newMemHandler(), newMemHandler()}
	var chain []string
	for i, h := range hs {
		chain = append(chain, startStreamLogged(t, h, &logs[i]))
	}
	hs[1].chunks[7] = memChunk{version: 1, data: testData(1000, 1)}
	c := NewDataClient()
	defer c.Close()
	ctx := reqid.With(context.Background(), "push-1")
	if err := c.PushToken(ctx, chain, 9, testData(3*chunkfs.MaxFrameSize, 2), []byte("tok")); err != nil {
		t.Fatal(err)
	}
	for i := range logs {
		if l := logs[i].linesWith(`msg="data stream push"`, "req=push-1", "data_id=9"); len(l) != 1 {
			t.Errorf("replica %d: want one push line with the ID, log: %q", i, logs[i].String())
		}
	}
	p := make([]byte, 1000)
	if _, err := c.Read(reqid.With(context.Background(), "read-1"), chain[1], 7, 1, 0, p); err != nil {
		t.Fatal(err)
	}
	if l := logs[1].linesWith(`msg="data stream read"`, "req=read-1", "handle=7"); len(l) != 1 {
		t.Errorf("want one read line with the ID, log: %q", logs[1].String())
	}
	// Requests without an ID are served and not logged.
	if err := c.Push(context.Background(), chain, 10, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if l := logs[0].linesWith("data_id=10"); len(l) != 0 {
		t.Errorf("a push without an ID was logged: %q", l)
	}
}

func TestRequestIDEncoding(t *testing.T) {
	for _, p := range []*pushRequest{
		{id: 1, length: 5, reqID: "abc"},
		{id: 1, length: 5, token: []byte("tok"), reqID: strings.Repeat("z", reqid.MaxLen)},
		{id: 1, length: 5, chain: []string{"127.0.0.1:1"}, token: []byte("tok")},
	} {
		b, err := p.encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodePush(b)
		if err != nil || got.reqID != p.reqID || !bytes.Equal(got.token, p.token) {
			t.Errorf("push %+v decoded as %+v, %v", p, got, err)
		}
	}
	r := &readRequest{handle: 3, length: 10, reqID: "r-1"}
	if got, err := decodeRead(r.encode()); err != nil || got.reqID != "r-1" || got.token != nil {
		t.Errorf("read decoded as %+v, %v", got, err)
	}
	// A frame without an ID is the frame of before.
	old := (&readRequest{handle: 3, length: 10, token: []byte("t")}).encode()
	if want := append(binaryRead(3, 10), 1, 't'); !bytes.Equal(old, want) {
		t.Errorf("a read without an ID encodes as %x, want %x", old, want)
	}
	if _, err := (&pushRequest{reqID: "bad id"}).encode(); chunkfs.KindOf(err) != chunkfs.KindInvalid {
		t.Errorf("encoding a malformed ID: %v", err)
	}
	// Malformed IDs on the wire are protocol errors: the connection closes.
	base := binaryRead(3, 10)
	for name, tail := range map[string][]byte{
		"bad character":  append([]byte{0, 3}, "a b"...),
		"too long":       append([]byte{0, reqid.MaxLen + 1}, strings.Repeat("a", reqid.MaxLen+1)...),
		"empty":          {0, 0},
		"short":          {0, 5, 'a'},
		"trailing bytes": append([]byte{0, 1}, "ab"...),
	} {
		if _, err := decodeRead(append(append([]byte(nil), base...), tail...)); err == nil {
			t.Errorf("%s: decoded", name)
		} else if _, ok := err.(*errProtocol); !ok {
			t.Errorf("%s: %v is no protocol error", name, err)
		}
	}
}

// binaryRead is the fixed part of a read frame of handle h and length n.
func binaryRead(h, n int) []byte {
	return (&readRequest{handle: chunkfs.Handle(h), length: n}).encode()
}

func TestMalformedIDClosesTheConnection(t *testing.T) {
	var logs logBuffer
	addr := startStreamLogged(t, newMemHandler(), &logs)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	payload := append(binaryRead(1, 10), append([]byte{0, 3}, "a\nb"...)...)
	conn.Write(append([]byte(StreamMagic), appendFrame(nil, frameRead, payload)...))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(make([]byte, 64)); err == nil {
		t.Fatalf("server answered %d bytes to a malformed ID", n)
	}
	if l := logs.linesWith("bad request ID in read frame"); len(l) != 1 {
		t.Errorf("the refusal is not logged: %q", logs.String())
	}
}

// BenchmarkPushChainRequestID is BenchmarkPushChain's 64 KiB push without
// and with a request ID, the servers not logging at debug level: what
// carrying the ID costs when nobody traces.
func BenchmarkPushChainRequestID(b *testing.B) {
	var chain []string
	for range 3 {
		addr, _ := startStream(b, newMemHandler())
		chain = append(chain, addr)
	}
	c := NewDataClient()
	defer c.Close()
	data := testData(64<<10, 2)
	for _, v := range []struct {
		name string
		ctx  context.Context
	}{{"none", context.Background()}, {"id", reqid.With(context.Background(), reqid.New())}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := c.Push(v.ctx, chain, 1, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
