package rpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// startStreamIdle serves h with the given idle timeout (frames: 5 s).
func startStreamIdle(t *testing.T, h StreamHandler, idle time.Duration) (string, *StreamServer) {
	t.Helper()
	return startStreamBare(t, h, func(c *StreamConfig) { c.IdleTimeout = idle })
}

func (s *StreamServer) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// TestIdleConnectionsClosed opens many connections that send their magic
// and then nothing: the server closes every one once IdleTimeout passes.
// The bound under test is the server's read deadline; the test's own
// deadline (10 s) only keeps a failure from hanging.
func TestIdleConnectionsClosed(t *testing.T) {
	addr, srv := startStreamIdle(t, newMemHandler(), 100*time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			io.WriteString(conn, StreamMagic)
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			if !errors.Is(err, io.EOF) {
				errs <- err // a timeout here: the server kept it open
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("idle connection not closed by the server: %v", err)
	}
	for srv.open() > 0 {
		time.Sleep(time.Millisecond)
	}
}

// TestIdleTimeoutSparesRequests: the idle bound applies between requests
// only; inside a push, frames may come slower than it (FrameTimeout
// bounds them).
func TestIdleTimeoutSparesRequests(t *testing.T) {
	h := newMemHandler()
	addr, _ := startStreamIdle(t, h, 100*time.Millisecond)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, StreamMagic)
	push, _ := (&pushRequest{id: 9, length: 6}).encode()
	conn.Write(appendFrame(nil, framePush, push))
	time.Sleep(300 * time.Millisecond) // longer than the idle bound, inside a request
	conn.Write(appendFrame(nil, frameData, []byte("abcdef")))
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hdr [frameHeaderSize]byte
	for {
		fh, err := readHeader(conn, hdr[:])
		if err != nil {
			t.Fatalf("push slower than the idle bound: %v", err)
		}
		payload := make([]byte, fh.length)
		io.ReadFull(conn, payload)
		if fh.typ != frameWait {
			if fh.typ != frameOK {
				t.Fatalf("push answered %v %q", fh.typ, payload)
			}
			break
		}
	}
	if got := h.get(9); !bytes.Equal(got, []byte("abcdef")) {
		t.Fatalf("pushed %q", got)
	}
}

// TestPoolDropsAgedConnections: a connection idle in the pool longer than
// idleAge is closed, not reused (time from a fake now).
func TestPoolDropsAgedConnections(t *testing.T) {
	h := newMemHandler()
	h.chunks[1] = memChunk{version: 1, data: testData(1000, 1)}
	addr, _ := startStreamIdle(t, h, time.Hour)
	c := NewDataClient()
	defer c.Close()
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	ctx := context.Background()
	if _, err := c.Read(ctx, addr, 1, 1, 0, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	first := c.idle[addr][0].conn
	now = now.Add(DefaultIdleAge - time.Second)
	c.Read(ctx, addr, 1, 1, 0, make([]byte, 10))
	if c.idle[addr][0].conn != first {
		t.Fatal("a young pooled connection was not reused")
	}
	now = now.Add(DefaultIdleAge + time.Second)
	if _, err := c.Read(ctx, addr, 1, 1, 0, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if c.idle[addr][0].conn == first {
		t.Fatal("an aged pooled connection was reused")
	}
	if _, err := first.Write([]byte{0}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("aged connection not closed: %v", err)
	}
}

// TestReadResentAfterServerClosedIdle: a read on a pooled connection the
// server has closed meanwhile is sent again on a new connection.
func TestReadResentAfterServerClosedIdle(t *testing.T) {
	h := newMemHandler()
	data := testData(5000, 2)
	h.chunks[1] = memChunk{version: 1, data: data}
	addr, srv := startStreamIdle(t, h, 50*time.Millisecond)
	c := NewDataClient()
	defer c.Close()
	c.idleAge = time.Hour // reuse whatever the pool holds
	ctx := context.Background()
	p := make([]byte, len(data))
	if _, err := c.Read(ctx, addr, 1, 1, 0, p); err != nil {
		t.Fatal(err)
	}
	for srv.open() > 0 { // the server closes the idle connection
		time.Sleep(time.Millisecond)
	}
	clear(p)
	if n, err := c.Read(ctx, addr, 1, 1, 0, p); err != nil || !bytes.Equal(p[:n], data) {
		t.Fatalf("read after the server closed the pooled connection: %d, %v", n, err)
	}
	// The end of a chunk on a pooled connection is not taken for a close.
	if n, err := c.Read(ctx, addr, 1, 1, int64(len(data)), p[:10]); n != 0 || err != io.EOF {
		t.Fatalf("read at the end: %d, %v", n, err)
	}
}
