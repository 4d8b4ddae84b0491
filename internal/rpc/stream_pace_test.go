package rpc

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"
)

// paceRecorder records the paces a backgroundPacer sets.
type paceRecorder map[net.Conn]int64

func (r paceRecorder) set(conn net.Conn, rate int64) { r[conn] = rate }

// TestBackgroundPacer: background reads are not paced until another read
// is served, which paces those in progress at once; then, for
// foregroundWindow after the last one, they share the rate, and the pace
// is lifted at a piece after it, and when a read ends. A pacer without a
// rate never paces.
func TestBackgroundPacer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	rec := paceRecorder{}
	p := newBackgroundPacer(600, rec.set)
	a, b := &net.TCPConn{}, &net.TCPConn{}
	endA := p.begin(a)
	p.pace(a, t0)
	if _, set := rec[a]; set {
		t.Fatalf("no other read served yet: paced at %d", rec[a])
	}
	p.served(t0)
	if rec[a] != 600 {
		t.Errorf("a client read started: the background read is paced at %d B/s, want the whole 600 at once", rec[a])
	}
	endB := p.begin(b)
	p.pace(b, t0.Add(foregroundWindow/2))
	p.pace(a, t0.Add(foregroundWindow/2))
	if rec[a] != 300 || rec[b] != 300 {
		t.Errorf("two background reads: %d and %d B/s, want 300 each", rec[a], rec[b])
	}
	endB()
	if rec[b] != 0 {
		t.Errorf("a background read ended paced at %d: want its pace lifted", rec[b])
	}
	p.served(t0.Add(-time.Hour)) // an older read's end moves nothing back
	p.pace(a, t0.Add(foregroundWindow+time.Millisecond))
	if rec[a] != 0 {
		t.Errorf("a window after the last client read: paced at %d, want unpaced", rec[a])
	}
	endA()
	never := newBackgroundPacer(0, rec.set)
	c := &net.TCPConn{}
	defer never.begin(c)()
	never.served(t0)
	never.pace(c, t0)
	if _, set := rec[c]; set {
		t.Errorf("no background rate: paced at %d", rec[c])
	}
}

// TestBackgroundRead: a background read is answered as a read is, from
// memory and from a file (sendfile), by a server that paces them, with
// clients' reads going on beside it; a negative rate is refused.
func TestBackgroundRead(t *testing.T) {
	data := testData(3<<20+77, 11)
	fh := newFileHandler(t)
	fh.add(t, 1, data)
	mh := newMemHandler()
	mh.chunks[1] = memChunk{version: 1, data: data}
	pacing := func(c *StreamConfig) { c.BackgroundRate = 64 << 20 }
	fromFile, _ := startStreamBare(t, fh, pacing)
	fromMemory, _ := startStreamBare(t, mh, pacing)
	c := NewDataClient()
	defer c.Close()
	ctx := context.Background()
	for _, addr := range []string{fromFile, fromMemory} {
		if _, err := c.Read(ctx, addr, 1, 1, 0, make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		p := make([]byte, len(data))
		n, err := c.ReadBackground(ctx, addr, 1, 1, 0, p, nil)
		if err != nil || !bytes.Equal(p[:n], data) {
			t.Fatalf("background read from %s: %d bytes, %v", addr, n, err)
		}
		if n, err := c.Read(ctx, addr, 1, 1, 5, p[:1000]); err != nil || !bytes.Equal(p[:n], data[5:1005]) {
			t.Fatalf("read after a background read on the same connection: %d bytes, %v", n, err)
		}
	}
	cfg := DefaultStreamConfig()
	cfg.BackgroundRate = -1
	if _, err := NewStreamServer(mh, cfg); err == nil {
		t.Error("a negative background rate was accepted")
	}
}
