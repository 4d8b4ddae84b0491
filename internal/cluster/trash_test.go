package cluster

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/master"
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

// TestNewLeaderPurgesDueTrash: each master of three runs on its own fake
// clock. A file is deleted into the trash; the followers' clocks pass the
// grace period (their trash loops look, but do not lead), the leader's
// does not. Once the leader is killed, the new one purges the entry as it
// takes over, as a lone master does at its start, not a look later (which
// never came here: its clock stands still).
func TestNewLeaderPurgesDueTrash(t *testing.T) {
	const period = time.Hour
	var mu sync.Mutex
	clocks := map[string]*clock.Fake{}
	cfg := DefaultConfig()
	cfg.Masters = 3
	cfg.TrashPeriod = period
	cfg.Master = func(mc *master.Config) {
		mu.Lock()
		defer mu.Unlock()
		clocks[mc.NodeID] = clock.NewFake(time.Now())
		mc.Clock = clocks[mc.NodeID]
	}
	c, cl, ctx := startWith(t, cfg)
	f, err := cl.OpenFile(ctx, "/f", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := cl.Remove(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	old := c.Leader()
	for i := range c.Masters() {
		waitApplied(t, ctx, c.GroupMasterAddr(i), cl)
		if i != old {
			mu.Lock()
			clocks[c.GroupMemberName(i)].Advance(period + time.Minute)
			mu.Unlock()
		}
	}
	if err := c.StopGroupMaster(old); err != nil {
		t.Fatal(err)
	}
	now, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for len(trashAt(t, ctx, c.GroupMasterAddr(now))) != 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("the new leader kept the entry due: %+v", trashAt(t, ctx, c.GroupMasterAddr(now)))
		case <-time.After(50 * time.Millisecond):
		}
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
