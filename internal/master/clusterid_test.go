package master

import (
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestChunkserverOfAnotherClusterRefused: a master logs a cluster ID at
// start and gives it to a registering chunkserver; one that names another
// cluster is refused, registration and heartbeat alike, and is told
// nothing (above all no garbage), and the ID survives a restart.
func TestChunkserverOfAnotherClusterRefused(t *testing.T) {
	dir := t.TempDir()
	tm := startMaster(t, dir, nil)
	f, resp := tm.startCSWith("a", "")
	mine := resp.ClusterId
	if !strings.HasPrefix(mine, "CID-") {
		t.Fatalf("registration answered cluster %q, want the master's", mine)
	}
	req := &pb.RegisterRequest{Id: f.id, Addr: f.addr, Capacity: 1 << 40, Free: 1 << 39, ClusterId: "CID-other",
		Chunks: []*pb.ChunkReplica{{Handle: 77, Version: 1}}}
	got, err := tm.c.Register(bg, req)
	if chunkfs.KindOf(err) != chunkfs.KindPermission || !strings.Contains(err.Error(), "CID-other") || got != nil {
		t.Fatalf("registration naming another cluster: %+v, %v; want refused", got, err)
	}
	if _, err := tm.c.Heartbeat(bg, &pb.HeartbeatRequest{Id: f.id, Addr: f.addr, ClusterId: "CID-other"}); chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Fatalf("heartbeat naming another cluster: %v", err)
	}
	req.ClusterId = mine
	if _, err := tm.c.Register(bg, req); err != nil {
		t.Fatalf("registration naming this cluster: %v", err)
	}
	clk := tm.clock
	tm.close()
	tm = startMaster(t, dir, clk)
	if again := tm.register(f, ""); again.ClusterId != mine {
		t.Fatalf("after a restart the cluster is %q, was %q", again.ClusterId, mine)
	}
}
