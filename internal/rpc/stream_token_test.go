package rpc

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/chunkfs/chunkfs"
)

// startStreamAuth serves h with authorizeReadPush(seen).
func startStreamAuth(t *testing.T, h StreamHandler, seen chan<- StreamRequest) string {
	t.Helper()
	addr, _ := startStreamBare(t, h, func(c *StreamConfig) { c.Authorize = authorizeReadPush(seen) })
	return addr
}

// authorizeReadPush is an Authorize that lets a read of chunk h through
// with the token "read <h>" and a push with "push", telling seen (if not
// nil) of each request.
func authorizeReadPush(seen chan<- StreamRequest) func(StreamRequest) error {
	return func(r StreamRequest) error {
		if seen != nil {
			seen <- r
		}
		want := "push"
		if !r.Push {
			want = fmt.Sprintf("read %d", r.Handle)
		}
		if string(r.Token) != want {
			return chunkfs.E("stream", "", chunkfs.KindPermission, "permission denied: token for another chunk")
		}
		return nil
	}
}

func TestStreamRefusesUnauthorisedRead(t *testing.T) {
	h := newMemHandler()
	h.chunks[7] = memChunk{version: 1, data: testData(100000, 7)}
	addr := startStreamAuth(t, h, nil)
	c := NewDataClient()
	defer c.Close()
	for _, tok := range []string{"", "read 8", "push", "read 7 "} {
		p := make([]byte, 1000)
		n, err := c.ReadToken(context.Background(), addr, 7, 1, 0, p, []byte(tok))
		// The client may have read the error frame into p; no chunk data.
		if n != 0 || chunkfs.KindOf(err) != chunkfs.KindPermission || bytes.Contains(p, h.chunks[7].data[:16]) {
			t.Fatalf("read with token %q: %d bytes, %v (%v); want nothing, permission denied", tok, n, err, chunkfs.KindOf(err))
		}
	}
	p := make([]byte, 1000)
	if n, err := c.ReadToken(context.Background(), addr, 7, 1, 0, p, []byte("read 7")); err != nil || n != 1000 || !bytes.Equal(p, h.chunks[7].data[:1000]) {
		t.Fatalf("read with the right token after refusals: %d, %v", n, err)
	}
	if _, err := c.ReadToken(context.Background(), addr, 7, 1, 0, p, make([]byte, MaxTokenLen+1)); chunkfs.KindOf(err) != chunkfs.KindInvalid {
		t.Fatalf("oversized token: %v", err)
	}
}

func TestStreamRefusesUnauthorisedPush(t *testing.T) {
	first, second := newMemHandler(), newMemHandler()
	seen := make(chan StreamRequest, 4)
	chain := []string{startStreamAuth(t, first, nil), startStreamAuth(t, second, seen)}
	c := NewDataClient()
	defer c.Close()
	data := testData(3*chunkfs.MaxFrameSize+5, 1)
	if err := c.PushToken(context.Background(), chain, 1, data, []byte("read 1")); chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Fatalf("push with a read token: %v; want permission denied", err)
	}
	if first.get(1) != nil || second.get(1) != nil || len(seen) != 0 {
		t.Fatal("a refused push was kept or forwarded")
	}
	if err := c.PushToken(context.Background(), chain, 2, data, []byte("push")); err != nil {
		t.Fatalf("push with a write token: %v", err)
	}
	if r := <-seen; !r.Push || string(r.Token) != "push" {
		t.Fatalf("the next replica got %+v; want the client's token forwarded", r)
	}
	if !bytes.Equal(second.get(2), data) {
		t.Fatal("the authorised push did not reach the chain's end")
	}
}

func TestTokenFieldRoundTrip(t *testing.T) {
	tok := bytes.Repeat([]byte{0xab}, 90)
	p := &pushRequest{id: 1, length: 2, chain: []string{"a:1"}, token: tok}
	b, err := p.encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodePush(b)
	if err != nil || !bytes.Equal(back.token, tok) || back.chain[0] != "a:1" {
		t.Fatalf("push round trip: %+v, %v", back, err)
	}
	r, err := decodeRead((&readRequest{handle: 3, length: 4, token: tok}).encode())
	if err != nil || !bytes.Equal(r.token, tok) || r.handle != 3 {
		t.Fatalf("read round trip: %+v, %v", r, err)
	}
	if _, err := (&pushRequest{token: make([]byte, MaxTokenLen+1)}).encode(); err == nil {
		t.Fatal("oversized push token encoded")
	}
	for _, bad := range [][]byte{{0}, {5, 1, 2}, {1, 1, 2}} {
		if _, err := decodeRead(append((&readRequest{handle: 3}).encode(), bad...)); err == nil {
			t.Fatalf("read frame with token field %v accepted", bad)
		}
	}
}
