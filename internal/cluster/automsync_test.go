package cluster

import (
	"io/fs"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/clock"
)

// A client reading through an observer sees another client's write late
// while the observer lags, and with AutoMsync at most one period late: the
// first read once the period has passed syncs with the leader, and the
// lagging observer hands it to the leader rather than answer from the
// past. A client with LeaderReads sees the write at once.
func TestAutoMsyncBoundsStaleness(t *testing.T) {
	c, writer, ctx := startGroupCluster(t)
	const path, period = "/auto", 10 * time.Second
	put(t, ctx, writer, path, nil)
	if err := writer.Chmod(ctx, path, 0o600); err != nil {
		t.Fatal(err)
	}
	observer := c.Masters() - 1
	waitApplied(t, ctx, c.GroupMasterAddr(observer), writer)

	fake := clock.NewFake(time.Unix(1_000_000, 0))
	newClient := func(adjust func(*client.Config)) *client.Client {
		cfg := client.DefaultConfig()
		cfg.Master, cfg.Caller = c.MasterAddr(), chunkfs.Root
		adjust(&cfg)
		cl, err := client.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	plain := newClient(func(*client.Config) {})
	auto := newClient(func(cfg *client.Config) { cfg.AutoMsync, cfg.Clock = period, fake })
	leaderReads := newClient(func(cfg *client.Config) { cfg.LeaderReads = true })
	mode := func(cl *client.Client) fs.FileMode {
		t.Helper()
		fi, err := cl.Stat(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	for name, cl := range map[string]*client.Client{"plain": plain, "auto": auto, "leader reads": leaderReads} {
		if m := mode(cl); m != 0o600 {
			t.Fatalf("%s client: mode %v before the change, want 0600", name, m)
		}
	}

	c.PauseRaft(observer, true) // the observer applies nothing more
	defer c.PauseRaft(observer, false)
	if err := writer.Chmod(ctx, path, 0o640); err != nil {
		t.Fatal(err)
	}
	if m := mode(plain); m != 0o600 {
		t.Fatalf("client without msync: mode %v; want the observer's stale 0600", m)
	}
	fake.Advance(period / 2)
	if m := mode(auto); m != 0o600 {
		t.Fatalf("auto-msync client half a period on: mode %v; want the stale 0600 (no msync due)", m)
	}
	if m := mode(leaderReads); m != 0o640 {
		t.Fatalf("leader-reads client: mode %v, want 0640 at once", m)
	}
	fake.Advance(period / 2)
	if m := mode(auto); m != 0o640 {
		t.Fatalf("auto-msync client a period on: mode %v, want 0640", m)
	}
	if auto.StateID() < writer.StateID() {
		t.Fatalf("auto-msync client at state %d, below the writer's %d", auto.StateID(), writer.StateID())
	}
	if err := plain.Msync(ctx); err != nil {
		t.Fatal(err)
	}
	if m := mode(plain); m != 0o640 {
		t.Fatalf("client after an explicit msync: mode %v, want 0640", m)
	}

	// Let through again, the observer catches up and serves the new state.
	c.PauseRaft(observer, false)
	waitApplied(t, ctx, c.GroupMasterAddr(observer), writer)
	fake.Advance(period)
	if m := mode(auto); m != 0o640 {
		t.Fatalf("auto-msync client after the observer caught up: mode %v", m)
	}
}
