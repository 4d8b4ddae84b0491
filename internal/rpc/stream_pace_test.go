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
	p := newReadPacer(600, 0, rec.set)
	a, b := &net.TCPConn{}, &net.TCPConn{}
	endA := p.begin(a, backgroundRead)
	if rec[a] != 600 {
		t.Errorf("one background read: paced at %d B/s, want the whole 600", rec[a])
	}
	endB := p.begin(b, backgroundRead)
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
	never := newReadPacer(0, 0, rec.set)
	c := &net.TCPConn{}
	never.begin(c, backgroundRead)()
	if _, set := rec[c]; set {
		t.Errorf("no background rate: paced at %d", rec[c])
	}
}

// TestReadPace: the pacing rule. An urgent read is never paced; while
// one runs the clients' reads and the background ones share the yield
// rate, a background read keeping to its share of the background rate
// when that is lower; otherwise clients' reads are not paced. Zero rates
// pace nothing.
func TestReadPace(t *testing.T) {
	for _, c := range []struct {
		class       readClass
		n           readCounts
		rate, yield int64
		want        int64
	}{
		{urgentRead, readCounts{foreground: 3, background: 2, urgent: 1}, 600, 300, 0},
		{foregroundRead, readCounts{foreground: 3}, 600, 300, 0},                             // no urgent read: clients unpaced
		{backgroundRead, readCounts{foreground: 3, background: 2}, 600, 300, 300},            // the background rate's share
		{foregroundRead, readCounts{foreground: 2, background: 1, urgent: 1}, 600, 300, 100}, // the yield rate's share
		{backgroundRead, readCounts{foreground: 2, background: 1, urgent: 1}, 600, 300, 100},
		{backgroundRead, readCounts{foreground: 1, background: 4, urgent: 2}, 200, 1000, 50}, // its background share is lower
		{backgroundRead, readCounts{background: 1, urgent: 1}, 0, 300, 300},                  // no background rate: still yields
		{foregroundRead, readCounts{foreground: 1, urgent: 1}, 600, 0, 0},                    // no yield rate: nothing yields
		{backgroundRead, readCounts{background: 2, urgent: 1}, 600, 0, 300},
	} {
		if got := readPace(c.class, c.n, c.rate, c.yield); got != c.want {
			t.Errorf("class %d, %+v, rate %d, yield %d: pace %d, want %d", c.class, c.n, c.rate, c.yield, got, c.want)
		}
	}
}

// TestReadPacerYield: a client's read is not paced until an urgent read
// begins; then it and the background read share the yield rate, and when
// the urgent read ends the client's pace is lifted and the background
// read is back at the background rate. Without a yield rate clients'
// reads are not even counted.
func TestReadPacerYield(t *testing.T) {
	rec := paceRecorder{}
	p := newReadPacer(600, 200, rec.set)
	client, clone, urgent := &net.TCPConn{}, &net.TCPConn{}, &net.TCPConn{}
	endClient := p.begin(client, foregroundRead)
	endClone := p.begin(clone, backgroundRead)
	if _, set := rec[client]; set || rec[clone] != 600 {
		t.Errorf("no urgent read: client paced %v (%d), clone at %d; want unpaced, 600", set, rec[client], rec[clone])
	}
	endUrgent := p.begin(urgent, urgentRead)
	if rec[client] != 100 || rec[clone] != 100 || rec[urgent] != 0 {
		t.Errorf("an urgent read: client %d, clone %d, urgent %d B/s; want 100, 100, unpaced", rec[client], rec[clone], rec[urgent])
	}
	endUrgent()
	if rec[client] != 0 || rec[clone] != 600 {
		t.Errorf("the urgent read ended: client %d, clone %d B/s; want unpaced, 600", rec[client], rec[clone])
	}
	endClient()
	endClone()
	if len(p.conns) != 0 || p.counts != (readCounts{}) {
		t.Errorf("all ended: %d reads, counts %+v", len(p.conns), p.counts)
	}
	off := newReadPacer(600, 0, rec.set)
	off.begin(&net.TCPConn{}, foregroundRead)
	if len(off.conns) != 0 {
		t.Errorf("no yield rate: %d clients' reads counted", len(off.conns))
	}
}

// TestReadPacerTotals: the totals count every read begun by its class,
// clients' reads too when they concern no pacing, and count a read as
// paced once however often its pace changes; an urgent read is never
// paced, and a client's read is paced only while it yields to one.
func TestReadPacerTotals(t *testing.T) {
	rec := paceRecorder{}
	p := newReadPacer(600, 200, rec.set)
	client, clone, urgent, late := &net.TCPConn{}, &net.TCPConn{}, &net.TCPConn{}, &net.TCPConn{}
	p.begin(client, foregroundRead)()
	endClone := p.begin(clone, backgroundRead) // paced at 600
	endUrgent := p.begin(urgent, urgentRead)   // the clone yields: 200
	p.begin(late, foregroundRead)()            // yields too
	endUrgent()                                // the clone is back at 600
	endClone()
	want := ReadTotals{Foreground: 2, Background: 1, Urgent: 1, Paced: 2}
	if got := p.totals(); got != want {
		t.Errorf("totals: %+v, want %+v", got, want)
	}
	off := newReadPacer(0, 0, rec.set)
	off.begin(client, foregroundRead)()
	off.begin(urgent, urgentRead)()
	if got, want := off.totals(), (ReadTotals{Foreground: 1, Urgent: 1}); got != want {
		t.Errorf("a pacer that paces nothing: totals %+v, want %+v", got, want)
	}
}

// TestBackgroundRead: a background read, and an urgent one, is answered as a read is, from
// memory and from a file (sendfile), by a server that paces them, with
// clients' reads going on beside it; a negative rate is refused.
func TestBackgroundRead(t *testing.T) {
	data := testData(3<<20+77, 11)
	fh := newFileHandler(t)
	fh.add(t, 1, data)
	mh := newMemHandler()
	mh.chunks[1] = memChunk{version: 1, data: data}
	pacing := func(c *StreamConfig) { c.BackgroundRate, c.YieldRate = 64<<20, 32<<20 }
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
		clear(p)
		if n, err := c.ReadUrgent(ctx, addr, 1, 1, 0, p, nil); err != nil || !bytes.Equal(p[:n], data) {
			t.Fatalf("urgent read from %s: %d bytes, %v", addr, n, err)
		}
	}
	cfg := DefaultStreamConfig()
	cfg.BackgroundRate = -1
	if _, err := NewStreamServer(mh, cfg); err == nil {
		t.Error("a negative background rate was accepted")
	}
	cfg.BackgroundRate, cfg.YieldRate = 0, -1
	if _, err := NewStreamServer(mh, cfg); err == nil {
		t.Error("a negative yield rate was accepted")
	}
}
