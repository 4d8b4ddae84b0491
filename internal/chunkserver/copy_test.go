package chunkserver

import (
	"context"
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestCopyChunk: a replica copied under a new handle reads the same, is
// reported, and takes writes of its own; bad requests change nothing.
func TestCopyChunk(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.grant(3, 1)
	if err := tc.write(3, 1, 0, []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cs := tc.cs(0)
	tc.grant(3, 2) // the master's revocation moves the chunk on
	resp, err := cs.CopyChunk(ctx, &pb.CopyChunkRequest{Handle: 3, Version: 2, NewHandle: 9})
	if err != nil || resp.Length != 10 {
		t.Fatalf("copy: %+v, %v", resp, err)
	}
	if got := tc.replica(0, 9, 2); string(got) != "0123456789" {
		t.Fatalf("copy reads %q", got)
	}
	tc.grant(9, 3)
	if err := tc.write(9, 3, 0, []byte("AB")); err != nil {
		t.Fatal(err)
	}
	if got := tc.replica(0, 3, 2); string(got) != "0123456789" {
		t.Fatalf("a write to the copy changed the original: %q", got)
	}
	for _, tc := range []struct {
		req  *pb.CopyChunkRequest
		want chunkfs.Kind
	}{
		{&pb.CopyChunkRequest{Handle: 0, Version: 2, NewHandle: 10}, chunkfs.KindInvalid},
		{&pb.CopyChunkRequest{Handle: 3, Version: 2, NewHandle: 3}, chunkfs.KindInvalid},
		{&pb.CopyChunkRequest{Handle: 3, Version: 2, NewHandle: 0}, chunkfs.KindInvalid},
		{&pb.CopyChunkRequest{Handle: 3, Version: 0, NewHandle: 10}, chunkfs.KindInvalid},
		{&pb.CopyChunkRequest{Handle: 3, Version: 1, NewHandle: 10}, chunkfs.KindStale},
		{&pb.CopyChunkRequest{Handle: 77, Version: 1, NewHandle: 10}, chunkfs.KindNotExist},
		{&pb.CopyChunkRequest{Handle: 3, Version: 2, NewHandle: 9}, chunkfs.KindStale}, // 9 is held, newer
	} {
		if _, err := cs.CopyChunk(ctx, tc.req); chunkfs.KindOf(err) != tc.want {
			t.Errorf("copy %+v: %v, want %v", tc.req, err, tc.want)
		}
	}
	if _, err := cs.ChunkInfo(ctx, &pb.ChunkInfoRequest{Handle: 10}); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Errorf("a refused copy left a replica: %v", err)
	}
}
