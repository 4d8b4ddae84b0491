package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestGroupTrashAgrees: in a group of three masters, every follower holds
// the trash entry a delete made, with the leader's time, and after the
// leader is killed the new one undeletes it, data and all.
func TestGroupTrashAgrees(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ChunkSize = 256 << 10
	cfg.Masters = 3
	cfg.TrashPeriod = time.Hour
	c, cl, ctx := startWith(t, cfg)
	data := []byte("kept through a failover")
	put(t, ctx, cl, "/f", data)
	if err := cl.Remove(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	var want *pb.TrashEntry
	for i := range c.Masters() {
		waitApplied(t, ctx, c.GroupMasterAddr(i), cl)
		es := trashAt(t, ctx, c.GroupMasterAddr(i))
		if len(es) != 1 || es[0].Path != "/f" {
			t.Fatalf("master %d's trash: %+v", i, es)
		}
		if want == nil {
			want = es[0]
		} else if es[0].DeletedNs != want.DeletedNs || es[0].Id != want.Id || es[0].Chunks != want.Chunks {
			t.Fatalf("master %d's entry %+v, another's %+v", i, es[0], want)
		}
	}
	if err := c.StopGroupMaster(c.Leader()); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Undelete(ctx, "/f", client.UndeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := get(ctx, cl, "/f"); err != nil || string(got) != string(data) {
		t.Fatalf("undeleted after the failover: %q, %v", got, err)
	}
}

func trashAt(t *testing.T, ctx context.Context, addr string) []*pb.TrashEntry {
	t.Helper()
	cc, err := rpc.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := pb.NewMasterClient(cc).TrashList(ctx, &pb.TrashListRequest{Caller: &pb.Caller{}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Entries
}
