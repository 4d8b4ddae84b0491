package rpc

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestReconnectsWithinASecondOfTheServersReturn: a connection to a server
// that was down long enough for gRPC's default back-off to grow (10 s: its
// next attempt would come seconds later) reaches the server within about a
// second of its return, as a restarted master or chunkserver needs.
func TestReconnectsWithinASecondOfTheServersReturn(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out 10 s of back-off")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	cc, err := Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	mc := pb.NewMasterClient(cc)
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := mc.Stat(ctx, &pb.StatRequest{Path: "/"})
		return err
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		err := call()
		if err == nil {
			t.Skip("another process took the port meanwhile and answered") // tests of other packages run at once
		}
		if chunkfs.KindOf(err) != chunkfs.KindUnavailable {
			t.Fatalf("call to a server that is down: %v, want unavailable", err)
		}
	}
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	gs := NewServer(slog.New(slog.DiscardHandler))
	pb.RegisterMasterServer(gs, pb.UnimplementedMasterServer{})
	go gs.Serve(lis)
	defer gs.Stop()
	back := time.Now()
	for chunkfs.KindOf(call()) == chunkfs.KindUnavailable {
		if time.Since(back) > 3*time.Second {
			t.Fatal("still unreachable 3 s after the server came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
