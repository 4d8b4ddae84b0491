package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// startGroup starts three voting masters, one observer and three
// chunkservers, and a client given every master's address.
func startGroupCluster(t *testing.T) (*Cluster, *client.Client, context.Context) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ChunkSize = 256 << 10
	cfg.Masters, cfg.Observers = 3, 1
	return startWith(t, cfg)
}

// startWith starts cfg's cluster in a temporary directory (no free-space
// floor for placement, then cfg.Master's changes), waits for a leader of
// a group and returns a client given every master's address; all are closed at the
// test's end.
func startWith(t *testing.T, cfg Config) (*Cluster, *client.Client, context.Context) {
	t.Helper()
	cfg.Dir = t.TempDir()
	mutate := cfg.Master
	cfg.Master = func(mc *master.Config) {
		mc.Placement.MinFree = 0
		if mutate != nil {
			mutate(mc)
		}
	}
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if cfg.Masters > 1 { // a lone master leads from its start
		if _, err := c.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := newDefaultClient(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return c, cl, ctx
}

// The leader of three masters is killed while a client writes: the client
// goes on against the new leader, within its calls' deadlines, and every
// file it was told was written reads back whole.
func TestGroupFailoverKeepsEveryAcknowledgedFile(t *testing.T) {
	c, cl, ctx := startGroupCluster(t)
	want := map[string][]byte{}
	for i := range 5 {
		p := fmt.Sprintf("/before-%d", i)
		want[p] = bytes.Repeat([]byte{byte('a' + i)}, 300<<10)
		put(t, ctx, cl, p, want[p])
	}
	old := c.Leader()
	if err := c.StopGroupMaster(old); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 5 {
		p := fmt.Sprintf("/after-%d", i)
		want[p] = bytes.Repeat([]byte{byte('A' + i)}, 100<<10)
		put(t, ctx, cl, p, want[p])
	}
	t.Logf("five files written %v after the leader was killed", time.Since(start).Round(time.Millisecond))
	next := c.Leader()
	if next < 0 || next == old {
		t.Fatalf("leader after the kill: %d (was %d)", next, old)
	}
	for p, data := range want {
		if got, err := get(ctx, cl, p); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes (%v), want the %d written", p, len(got), err, len(data))
		}
	}
	// The killed master comes back as a follower and catches up.
	if err := c.RestartGroupMaster(old); err != nil {
		t.Fatal(err)
	}
	st := waitApplied(t, ctx, c.GroupMasterAddr(old), cl)
	if st.Role == "leader" && c.Leader() != old {
		t.Fatalf("restarted master says it leads: %+v", st)
	}
}

// waitApplied waits until the master at addr has applied the client's
// state, and returns its status.
func waitApplied(t *testing.T, ctx context.Context, addr string, cl *client.Client) *pb.HAStatusResponse {
	t.Helper()
	cc, err := rpc.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	mc := pb.NewMasterClient(cc)
	want := uint64(cl.StateID())
	for {
		st, err := mc.HAStatus(ctx, &pb.HAStatusRequest{})
		if err == nil && st.Applied >= want {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not apply %d: %v %v", addr, want, st, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A follower refuses a mutation with the leader's address; an observer
// serves reads at the client's state and never leads.
func TestGroupFollowersAndObserver(t *testing.T) {
	c, cl, ctx := startGroupCluster(t)
	put(t, ctx, cl, "/seen", []byte("hello"))
	leader := c.Leader()
	for i := range c.Masters() {
		if i == leader {
			continue
		}
		cc, err := rpc.Dial(c.GroupMasterAddr(i))
		if err != nil {
			t.Fatal(err)
		}
		mc := pb.NewMasterClient(cc)
		st := waitApplied(t, ctx, c.GroupMasterAddr(i), cl) // an observer knows the leader once it has the log
		_, err = mc.Mkdir(ctx, &pb.MkdirRequest{Caller: &pb.Caller{Uid: 0, Gids: []uint32{0}}, Path: "/nope", Mode: 0o755})
		var hint *chunkfs.LeaderHint
		if chunkfs.KindOf(err) != chunkfs.KindNotLeader || !errors.As(err, &hint) || hint.Leader != c.GroupMasterAddr(leader) {
			t.Fatalf("mkdir on master %d: %v; want not the leader, naming %s", i, err, c.GroupMasterAddr(leader))
		}
		resp, err := mc.Stat(ctx, &pb.StatRequest{Caller: &pb.Caller{Uid: 0, Gids: []uint32{0}}, Path: "/seen", MinStateId: uint64(cl.StateID())})
		if err != nil || resp.Info.Length != 5 {
			t.Fatalf("stat on master %d (%s) at the client's state: %v, %v", i, st.Role, resp, err)
		}
		if wantRole := "follower"; i == c.Masters()-1 {
			if st.Role != "observer" {
				t.Fatalf("master %d is %q, want observer", i, st.Role)
			}
		} else if st.Role != wantRole {
			t.Fatalf("master %d is %q, want %s", i, st.Role, wantRole)
		}
		cc.Close()
	}
	st, err := cl.HAStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	voters, observers := 0, 0
	for _, m := range st.Members {
		if m.Voter {
			voters++
		} else {
			observers++
		}
	}
	if voters != 3 || observers != 1 {
		t.Fatalf("group members %+v; want 3 voters and 1 observer", st.Members)
	}
	if err := cl.Msync(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestObserverForgetsDeletedReplicas: a replica the leader has deleted (an
// excess one, trimmed after the file's replication is lowered) is dropped
// by the observer too, from the chunkserver's next heartbeat, so the
// observer stops handing it to readers; before, it listed the replica
// until the server registered again.
func TestObserverForgetsDeletedReplicas(t *testing.T) {
	c, cl, ctx := startGroupCluster(t)
	put(t, ctx, cl, "/trimmed", bytes.Repeat([]byte("x"), 1000))
	obs := c.Masters() - 1
	cc, err := rpc.Dial(c.GroupMasterAddr(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	mc := pb.NewMasterClient(cc)
	replicas := func() int {
		resp, err := mc.GetChunks(ctx, &pb.GetChunksRequest{Caller: &pb.Caller{Uid: 0, Gids: []uint32{0}}, Path: "/trimmed", MinStateId: uint64(cl.StateID())})
		if chunkfs.KindOf(err) == chunkfs.KindNotLeader {
			return 0 // it knows no location yet and hands the read to the leader
		}
		if err != nil {
			t.Fatalf("observer's locations: %v", err)
		}
		if len(resp.Chunks) != 1 {
			t.Fatalf("observer lists %d chunks, want 1", len(resp.Chunks))
		}
		return len(resp.Chunks[0].Replicas)
	}
	for replicas() != 3 {
		if ctx.Err() != nil {
			t.Fatal("the observer never learned the three replicas")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cl.SetReplication(ctx, "/trimmed", 2); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for replicas() != 2 {
		if waitCtx.Err() != nil {
			t.Fatalf("the observer still lists %d replicas after the leader trimmed one", replicas())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
