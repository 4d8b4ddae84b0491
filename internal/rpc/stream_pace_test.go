package rpc

import (
	"bytes"
	"context"
	"net"
	"testing"
)

// paceRecorder records the paces a backgroundPacer sets.
type paceRecorder map[net.Conn]int64

func (r paceRecorder) set(conn net.Conn, rate int64) { r[conn] = rate }

// TestBackgroundPacer: a background read is paced from its start, with
// no client reading; two share the rate, and when one ends its pace is
// lifted and the other takes the whole rate again. A pacer without a rate
// never paces.
func TestBackgroundPacer(t *testing.T) {
	rec := paceRecorder{}
	p := newBackgroundPacer(600, rec.set)
	a, b := &net.TCPConn{}, &net.TCPConn{}
	endA := p.begin(a)
	if rec[a] != 600 {
		t.Errorf("one background read: paced at %d B/s, want the whole 600", rec[a])
	}
	endB := p.begin(b)
	if rec[a] != 300 || rec[b] != 300 {
		t.Errorf("two background reads: %d and %d B/s, want 300 each", rec[a], rec[b])
	}
	endB()
	if rec[b] != 0 {
		t.Errorf("a background read ended paced at %d: want its pace lifted", rec[b])
	}
	if rec[a] != 600 {
		t.Errorf("the other one left: paced at %d B/s, want 600 again", rec[a])
	}
	endA()
	if rec[a] != 0 || len(p.conns) != 0 {
		t.Errorf("all ended: pace %d, %d reads counted", rec[a], len(p.conns))
	}
	never := newBackgroundPacer(0, rec.set)
	c := &net.TCPConn{}
	never.begin(c)()
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
