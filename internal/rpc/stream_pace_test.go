package rpc

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestBackgroundPacer: background reads are not paced until another read
// is served; then, for foregroundWindow after the last one, those in
// progress share the rate; a pacer without a rate never paces.
func TestBackgroundPacer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := &backgroundPacer{rate: 600}
	end := p.begin()
	if got := p.pace(t0); got != 0 {
		t.Fatalf("no other read served yet: paced at %d, want unpaced", got)
	}
	p.served(t0)
	if got := p.pace(t0.Add(foregroundWindow / 2)); got != 600 {
		t.Errorf("one background read while clients read: %d B/s, want the whole 600", got)
	}
	end2 := p.begin()
	end3 := p.begin()
	if got := p.pace(t0.Add(foregroundWindow)); got != 200 {
		t.Errorf("three background reads: %d B/s each, want 200", got)
	}
	end2()
	end3()
	p.served(t0.Add(-time.Hour)) // an older read's end changes nothing
	if got := p.pace(t0.Add(foregroundWindow + time.Millisecond)); got != 0 {
		t.Errorf("a window after the last client read: paced at %d, want unpaced", got)
	}
	end()
	never := &backgroundPacer{}
	never.served(t0)
	if got := never.pace(t0); got != 0 {
		t.Errorf("no background rate: paced at %d", got)
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
