package cluster

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// waitSafeMode asks the master until its safe mode's reason contains want
// ("" for off), or fails the test after a minute.
func waitSafeMode(t *testing.T, ctx context.Context, cl *client.Client, want string) *client.SafeModeStatus {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := cl.SafeMode(ctx, "get")
		switch {
		case err == nil && want == "" && !st.On:
			return st
		case err == nil && want != "" && st.On && strings.Contains(st.Reason, want):
			return st
		case time.Now().After(deadline):
			t.Fatalf("safe mode %+v (%v), want reason %q", st, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// loseChunk makes path's first chunk lost for good: every replica's files
// are removed while the chunkservers are down.
func loseChunk(t *testing.T, ctx context.Context, c *Cluster, cl *client.Client, path string) {
	t.Helper()
	chunks, err := cl.Chunks(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	h := chunkfs.Handle(chunks[0].Handle)
	for i := range c.Chunkservers() {
		if err := c.StopChunkserver(i); err != nil {
			t.Fatal(err)
		}
		if c.HasReplica(i, h) {
			if err := c.RemoveReplica(i, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range c.Chunkservers() {
		if err := c.RestartChunkserver(i); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSafeModeLeaveWithAChunkLost: a chunk lost for good keeps a restarted
// master in safe mode (1 of 2 chunks located, under the 99.9 % needed);
// an ordinary user may read that but not end it; the superuser's leave
// does, and then new chunks are written. The leave is not carried into the
// next start: a restart waits again.
func TestSafeModeLeaveWithAChunkLost(t *testing.T) {
	c, cl, _, ctx := startHeal(t, 3, nil)
	put(t, ctx, cl, "/lost", healBytes(1, 1000))
	kept := healBytes(2, 1000)
	put(t, ctx, cl, "/kept", kept)
	loseChunk(t, ctx, c, cl, "/lost")
	if err := c.RestartMaster(); err != nil {
		t.Fatal(err)
	}
	waitSafeMode(t, ctx, cl, "1 of 2 chunks located")

	// A new chunk is refused with the retriable error; a client with a
	// short deadline gives up with it.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	f, err := cl.Create(short, "/new")
	if err == nil {
		_, err = f.Write([]byte("x"))
		if err == nil {
			err = f.Close()
		}
	}
	cancel()
	if err == nil || !strings.Contains(err.Error(), "safe mode") {
		t.Fatalf("a write needing a new chunk in safe mode: %v, want a safe mode error", err)
	}

	user := userCaller(t, ctx, c, chunkfs.Caller{UID: 1000, GIDs: []uint32{1000}})
	if st, err := user.SafeMode(ctx, "get"); err != nil || !st.On || st.Held {
		t.Fatalf("a user's get: %+v, %v; want on, not held", st, err)
	}
	for _, a := range []string{"leave", "enter"} {
		if _, err := user.SafeMode(ctx, a); chunkfs.KindOf(err) != chunkfs.KindPermission {
			t.Errorf("a user's %s: %v, want permission denied", a, err)
		}
	}
	for _, a := range []string{"bogus", "LEAVE", strings.Repeat("x", 1<<16)} {
		if _, err := cl.SafeMode(ctx, a); chunkfs.KindOf(err) != chunkfs.KindInvalid {
			t.Errorf("action %.20q: %v, want invalid", a, err)
		}
	}
	waitSafeMode(t, ctx, cl, "1 of 2 chunks located") // nothing above changed it

	st, err := cl.SafeMode(ctx, "leave")
	if err != nil || st.On {
		t.Fatalf("leave: %+v, %v; want off", st, err)
	}
	data := healBytes(3, 3*healChunk/2)
	put(t, ctx, cl, "/after", data)
	if got, err := get(ctx, cl, "/after"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("/after read back %d bytes (%v)", len(got), err)
	}
	if got, err := get(ctx, cl, "/kept"); err != nil || !bytes.Equal(got, kept) {
		t.Fatalf("/kept read back %d bytes (%v)", len(got), err)
	}
	if rep, err := cl.ClusterReport(ctx); err != nil || rep.SafeMode || rep.Missing != 1 {
		t.Fatalf("report after leave: %+v, %v; want safe mode off, 1 chunk missing", rep, err)
	}

	if err := c.RestartMaster(); err != nil {
		t.Fatal(err)
	}
	waitSafeMode(t, ctx, cl, "chunks located")
}

// TestSafeModeEnterHoldsThroughRestart: the superuser's enter refuses new
// chunks with the retriable error while writes to located chunks go on;
// the hold is logged, so a restarted master is still held (however many
// chunks are located), and admin report shows it; leave ends it.
func TestSafeModeEnterHoldsThroughRestart(t *testing.T) {
	c, cl, _, ctx := startHeal(t, 3, nil)
	put(t, ctx, cl, "/a", healBytes(1, 1000))
	st, err := cl.SafeMode(ctx, "enter")
	if err != nil || !st.On || !st.Held {
		t.Fatalf("enter: %+v, %v; want on and held", st, err)
	}
	if st, err := cl.SafeMode(ctx, "enter"); err != nil || !st.Held {
		t.Fatalf("enter again: %+v, %v", st, err)
	}
	mc := rawMaster(t, c)
	root := &pb.Caller{}
	if _, err := mc.Create(ctx, &pb.CreateRequest{Caller: root, Path: "/b", Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	_, err = mc.PrepareWrite(ctx, &pb.PrepareWriteRequest{Caller: root, Path: "/b", Index: 0})
	if chunkfs.KindOf(err) != chunkfs.KindUnavailable || !strings.Contains(err.Error(), "held by an operator") {
		t.Fatalf("a new chunk while held: %v, want unavailable (retriable), held by an operator", err)
	}
	over := healBytes(4, 1000)
	overwrite(t, ctx, cl, "/a", over) // its chunk exists: written while held
	if err := c.RestartMaster(); err != nil {
		t.Fatal(err)
	}
	rep := waitLive(t, ctx, cl, 3) // every chunk located: start-up safe mode alone would end
	if !rep.SafeMode || !rep.SafeModeHeld || !strings.Contains(rep.SafeModeReason, "held by an operator") {
		t.Fatalf("report after a restart: safe mode %v held %v (%s); want held", rep.SafeMode, rep.SafeModeHeld, rep.SafeModeReason)
	}
	if st, err := cl.SafeMode(ctx, "leave"); err != nil || st.On || st.Held {
		t.Fatalf("leave: %+v, %v; want off", st, err)
	}
	data := healBytes(5, 1000)
	put(t, ctx, cl, "/b", data)
	if got, err := get(ctx, cl, "/a"); err != nil || !bytes.Equal(got, over) {
		t.Fatalf("/a read back %d bytes (%v)", len(got), err)
	}
}

// TestSafeModeHeldAcrossFailover: in a group of three masters the hold
// is logged: every master reports it, and a new leader after the old one
// stops still refuses new chunks until leave.
func TestSafeModeHeldAcrossFailover(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Masters = 3
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cl, err := newDefaultClient(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	put(t, ctx, cl, "/a", healBytes(1, 1000))
	if _, err := cl.SafeMode(ctx, "enter"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		waitReportHeld(t, ctx, c, i, true)
	}
	old := c.Leader()
	if err := c.StopGroupMaster(old); err != nil {
		t.Fatal(err)
	}
	st := waitSafeMode(t, ctx, cl, "held by an operator")
	if !st.Held || c.Leader() == old {
		t.Fatalf("after failover: %+v, leader %d (old %d)", st, c.Leader(), old)
	}
	if _, err := cl.SafeMode(ctx, "leave"); err != nil {
		t.Fatal(err)
	}
	put(t, ctx, cl, "/b", healBytes(2, 1000))
	if err := c.RestartGroupMaster(old); err != nil {
		t.Fatal(err)
	}
	waitReportHeld(t, ctx, c, old, false)
}

// waitReportHeld asks group master i (not the leader through the client)
// until its report says held, or fails after a minute.
func waitReportHeld(t *testing.T, ctx context.Context, c *Cluster, i int, held bool) {
	t.Helper()
	cc, err := c.Security().Dial(c.GroupMasterAddr(i))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	mc := pb.NewMasterClient(cc)
	deadline := time.Now().Add(time.Minute)
	for {
		rep, err := mc.ClusterReport(ctx, &pb.ClusterReportRequest{})
		if err == nil && rep.SafeModeHeld == held {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("master %d: report %v (%v), want held %v", i, rep.GetSafeModeReason(), err, held)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// overwrite writes data at the start of an existing file, in place.
func overwrite(t *testing.T, ctx context.Context, cl *client.Client, p string, data []byte) {
	t.Helper()
	f, err := cl.OpenFile(ctx, p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		t.Fatalf("overwriting %s: %v", p, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitLive asks the master until n chunkservers are live and every chunk
// is located, or fails after a minute.
func waitLive(t *testing.T, ctx context.Context, cl *client.Client, n int) *client.Report {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		rep, err := cl.ClusterReport(ctx)
		live := 0
		if err == nil {
			for _, s := range rep.Servers {
				if s.Alive {
					live++
				}
			}
			if live == n && rep.Missing == 0 {
				return rep
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d chunkservers live (%v), want %d", live, err, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rawMaster is a gRPC client of the master, for calls the client library
// retries.
func rawMaster(t *testing.T, c *Cluster) pb.MasterClient {
	t.Helper()
	cc, err := c.Security().Dial(c.MasterAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewMasterClient(cc)
}

// userCaller is a client acting as caller on the plain test cluster.
func userCaller(t *testing.T, ctx context.Context, c *Cluster, caller chunkfs.Caller) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Master = c.MasterAddr()
	cfg.Caller = caller
	cfg.Security = c.Security()
	cl, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}
