package master

import (
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestHeartbeatDeletedListBounded: a heartbeat listing more deleted
// replicas than a heartbeat may carry is refused as too large and changes
// nothing: the server's replicas stay counted.
func TestHeartbeatDeletedListBounded(t *testing.T) {
	tm := startMaster(t, "", nil)
	f := tm.startCS("cs-a", "r1")
	before := tm.m.Figures().Replicas
	_, err := tm.c.Heartbeat(bg, &pb.HeartbeatRequest{Id: f.id, Addr: f.addr, Capacity: 1 << 40, Free: 1 << 39, Deleted: make([]uint64, maxListInBeat+1)})
	if kindOf(err) != chunkfs.KindTooLarge {
		t.Fatalf("heartbeat with %d deleted replicas: %v, want too large", maxListInBeat+1, err)
	}
	if after := tm.m.Figures().Replicas; after != before {
		t.Fatalf("a refused heartbeat changed the replicas counted: %d → %d", before, after)
	}
}
