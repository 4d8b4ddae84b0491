package chunkserver

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/chunkstore"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// FuzzControl feeds the ChunkServer service's handlers hostile field
// values, as a peer could send them: every call must return (no panic)
// with nil or a *chunkfs.Error of a known kind. The requests name no
// secondaries and no reachable clone source, so nothing leaves the
// process.
func FuzzControl(f *testing.F) {
	f.Add(uint8(0), uint64(1), uint64(1), int64(0), int64(60000), int64(0), uint64(0), true)
	f.Add(uint8(0), uint64(1), uint64(1), int64(0), int64(-1), int64(0), uint64(0), true)
	f.Add(uint8(1), uint64(1), uint64(1), int64(-5), int64(1<<40), int64(0), uint64(3), false)
	f.Add(uint8(2), uint64(1), uint64(1), int64(0), int64(1<<20), int64(1<<20), uint64(3), false)
	f.Add(uint8(3), uint64(1), uint64(1), int64(0), int64(100), int64(-1), uint64(3), false)
	f.Add(uint8(4), uint64(1), uint64(1), int64(1<<19), int64(1<<30), int64(0), uint64(2), true)
	f.Add(uint8(4), uint64(1), uint64(1), int64(9223372036854775807), int64(9223372036854775807), int64(0), uint64(2), true)
	f.Add(uint8(6), uint64(1), uint64(2), int64(0), int64(-1), int64(0), uint64(0), false)
	f.Add(uint8(8), uint64(0), uint64(0), int64(0), int64(200000), int64(0), uint64(0), false)
	f.Add(uint8(9), uint64(0), uint64(1), int64(0), int64(-1), int64(0), uint64(0), false)
	s := fuzzServer(f)
	c := &control{s: s}
	f.Fuzz(func(t *testing.T, op uint8, h, v uint64, off, n, size int64, id uint64, flag bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		switch op % 10 {
		case 0:
			_, err = c.Lease(ctx, &pb.LeaseRequest{Handle: h, Version: v, Create: flag, LeaseMs: n})
		case 1:
			_, err = c.Write(ctx, &pb.WriteRequest{Handle: h, Version: v, Offset: off, DataId: id, Length: n})
		case 2:
			_, err = c.Append(ctx, &pb.AppendRequest{Handle: h, Version: v, DataId: id, Length: n, ChunkSize: size})
		case 3:
			_, err = c.Reserve(ctx, &pb.ReserveRequest{Handle: h, Version: v, DataId: id, Length: n, ChunkSize: size})
		case 4:
			_, err = c.Apply(ctx, &pb.ApplyRequest{Handle: h, Version: v, Serial: id, Offset: off, DataId: id, Length: n, Pad: flag})
		case 5:
			_, err = c.Sync(ctx, &pb.SyncRequest{Handle: h, Version: v})
		case 6:
			_, err = c.Truncate(ctx, &pb.TruncateRequest{Handle: h, Version: v, Length: n})
		case 7:
			_, err = c.ChunkInfo(ctx, &pb.ChunkInfoRequest{Handle: h, Token: []byte{byte(id)}})
		case 8:
			_, err = c.DeleteChunks(ctx, &pb.DeleteChunksRequest{Handles: make([]uint64, min(uint64(n)&0x3ffff, 200000))})
		case 9:
			src := []string{"", strings.Repeat("x", 300), s.Addr()}[id%3]
			_, err = c.Clone(ctx, &pb.CloneRequest{Handle: h, Version: v, Source: src, Length: n})
		}
		var e *chunkfs.Error
		if err != nil && (!errors.As(err, &e) || !e.Kind.Valid()) {
			t.Fatalf("op %d: %v is not a chunkfs error of a known kind", op%10, err)
		}
	})
}

// fuzzServer is a chunkserver on an in-memory file system with no master
// and no listener: its handlers are called directly.
func fuzzServer(f *testing.F) *Server {
	cfg := DefaultConfig()
	cfg.Dirs = []string{f.TempDir()}
	cfg.FS = chunkstore.NewMemFS(1 << 30)
	cfg.Clock = clock.NewFake(time.Unix(1e9, 0))
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.MaxChunkSize = 1 << 20
	cfg.Addr = "127.0.0.1:9"
	s, err := Open(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	return s
}
