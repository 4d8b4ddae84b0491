package chunkserver

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// writeOn creates chunk h at v on server i alone (as its primary) and
// writes data at its start.
func (tc *testCluster) writeOn(i int, h chunkfs.Handle, v chunkfs.Version, data []byte) {
	tc.t.Helper()
	ctx := context.Background()
	if _, err := tc.cs(i).Lease(ctx, &pb.LeaseRequest{Handle: uint64(h), Version: uint64(v), Create: true, LeaseMs: 60000}); err != nil {
		tc.t.Fatalf("lease on %d: %v", i, err)
	}
	for off := 0; off < len(data); off += 8 << 20 {
		piece := data[off:min(len(data), off+8<<20)]
		id := tc.newID()
		if err := tc.data.Push(ctx, []string{tc.addrs[i]}, id, piece); err != nil {
			tc.t.Fatal(err)
		}
		req := &pb.WriteRequest{Handle: uint64(h), Version: uint64(v), Offset: int64(off), DataId: uint64(id), Length: int64(len(piece))}
		if _, err := tc.cs(i).Write(ctx, req); err != nil {
			tc.t.Fatalf("write on %d: %v", i, err)
		}
	}
}

// clone asks server i to clone chunk h at v from server from.
func (tc *testCluster) clone(i int, h chunkfs.Handle, v chunkfs.Version, from int, length int64) (int64, error) {
	resp, err := tc.cs(i).Clone(context.Background(), &pb.CloneRequest{Handle: uint64(h), Version: uint64(v), Source: tc.addrs[from], Length: length})
	if err != nil {
		return 0, err
	}
	return resp.Length, nil
}

// holdsNothing fails unless server i neither holds nor lists chunk h, and
// no file of a clone in progress is left in its data directory.
func (tc *testCluster) holdsNothing(i int, h chunkfs.Handle) {
	tc.t.Helper()
	if _, err := tc.servers[i].store.Info(h); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		tc.t.Errorf("server %d: info of chunk %d after a failed clone: %v", i, h, err)
	}
	if _, err := tc.cs(i).ChunkInfo(context.Background(), &pb.ChunkInfoRequest{Handle: uint64(h)}); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		tc.t.Errorf("server %d: ChunkInfo after a failed clone: %v", i, err)
	}
	for _, in := range tc.servers[i].store.List() {
		if in.Handle == h {
			tc.t.Errorf("server %d lists chunk %d", i, h)
		}
	}
	filepath.WalkDir(tc.dirs[i], func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".incoming") {
			tc.t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

func TestCloneCopiesReplica(t *testing.T) {
	tc := newTestCluster(t, 2)
	data := randBytes(rand.New(rand.NewPCG(1, 2)), 3<<20+12345) // several pieces, a short last block
	tc.writeOn(0, 7, 3, data)
	n, err := tc.clone(1, 7, 3, 0, int64(len(data)))
	if err != nil || n != int64(len(data)) {
		t.Fatalf("clone: %d bytes, %v", n, err)
	}
	if got := tc.replica(1, 7, 3); !bytes.Equal(got, data) {
		t.Fatalf("clone differs from the source (%d vs %d bytes)", len(got), len(data))
	}
	info, err := tc.cs(1).ChunkInfo(context.Background(), &pb.ChunkInfoRequest{Handle: 7})
	if err != nil || info.Version != 3 || info.Length != int64(len(data)) {
		t.Fatalf("clone's info %+v, %v", info, err)
	}
	if err := tc.servers[1].store.Verify(7); err != nil {
		t.Fatalf("clone fails verification: %v", err)
	}
	// Once done, it is listed like any replica, and a second clone at the
	// same version is refused.
	if _, err := tc.clone(1, 7, 3, 0, 0); chunkfs.KindOf(err) != chunkfs.KindExist {
		t.Fatalf("clone of a replica held: %v, want KindExist", err)
	}
	if _, err := tc.clone(1, 7, 2, 0, 0); chunkfs.KindOf(err) != chunkfs.KindStale {
		t.Fatalf("clone older than the replica held: %v, want KindStale", err)
	}
	// It survives a restart.
	tc.servers[1].Close()
	tc.start(1)
	tc.master.wait(t, "register")
	if got := tc.replica(1, 7, 3); !bytes.Equal(got, data) {
		t.Fatal("clone differs after a restart")
	}
}

func TestCloneEmptyChunk(t *testing.T) {
	tc := newTestCluster(t, 2)
	if _, err := tc.cs(0).Lease(context.Background(), &pb.LeaseRequest{Handle: 4, Version: 1, Create: true}); err != nil {
		t.Fatal(err)
	}
	if n, err := tc.clone(1, 4, 1, 0, 0); err != nil || n != 0 {
		t.Fatalf("clone of an empty chunk: %d, %v", n, err)
	}
	if in, err := tc.servers[1].store.Info(4); err != nil || in.Version != 1 || in.Length != 0 {
		t.Fatalf("empty clone: %+v, %v", in, err)
	}
}

func TestCloneReplacesOlderReplica(t *testing.T) {
	tc := newTestCluster(t, 2)
	tc.writeOn(1, 9, 1, []byte("old and stale"))
	data := randBytes(rand.New(rand.NewPCG(3, 4)), 200000)
	tc.writeOn(0, 9, 2, data)
	if _, err := tc.clone(1, 9, 2, 0, int64(len(data))); err != nil {
		t.Fatalf("clone over an older replica: %v", err)
	}
	if got := tc.replica(1, 9, 2); !bytes.Equal(got, data) {
		t.Fatal("replica not replaced")
	}
}

func TestCloneOfCorruptSourceLeavesNothing(t *testing.T) {
	tc := newTestCluster(t, 2)
	data := randBytes(rand.New(rand.NewPCG(5, 6)), 2<<20)
	tc.writeOn(0, 5, 1, data)
	flipByte(t, chunkFile(t, tc.dirs[0], 5), 1<<20+70000) // a block of the second piece
	_, err := tc.clone(1, 5, 1, 0, int64(len(data)))
	if chunkfs.KindOf(err) != chunkfs.KindChecksum {
		t.Fatalf("clone of a corrupt source: %v, want KindChecksum", err)
	}
	tc.holdsNothing(1, 5)
	tc.master.wait(t, "corrupt") // the source found and reported its rot
}

func TestCloneOfStaleSourceFails(t *testing.T) {
	tc := newTestCluster(t, 2)
	tc.writeOn(0, 6, 1, []byte("version one"))
	if _, err := tc.clone(1, 6, 2, 0, 11); chunkfs.KindOf(err) != chunkfs.KindStale {
		t.Fatalf("clone from a source at an older version: %v, want KindStale", err)
	}
	tc.holdsNothing(1, 6)
	// A source shorter than the master knows is stale too.
	if _, err := tc.clone(1, 6, 1, 0, 12); chunkfs.KindOf(err) != chunkfs.KindStale {
		t.Fatalf("clone from a source shorter than expected: %v, want KindStale", err)
	}
	tc.holdsNothing(1, 6)
	if _, err := tc.clone(1, 66, 1, 0, 0); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("clone of a chunk the source lacks: %v, want KindNotExist", err)
	}
	tc.holdsNothing(1, 66)
}

func TestCloneFromUnreachableSource(t *testing.T) {
	tc := newTestCluster(t, 2)
	tc.writeOn(0, 8, 1, []byte("data"))
	tc.servers[0].Close()
	if _, err := tc.clone(1, 8, 1, 0, 4); chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("clone from a closed source: %v, want KindUnavailable", err)
	}
	tc.holdsNothing(1, 8)
}

func TestCloneRefusesBadRequests(t *testing.T) {
	tc := newTestCluster(t, 2)
	ok := func() *pb.CloneRequest {
		return &pb.CloneRequest{Handle: 1, Version: 1, Source: tc.addrs[0], Length: 10}
	}
	for _, tt := range []struct {
		name string
		edit func(*pb.CloneRequest)
	}{
		{"zero handle", func(r *pb.CloneRequest) { r.Handle = 0 }},
		{"zero version", func(r *pb.CloneRequest) { r.Version = 0 }},
		{"empty source", func(r *pb.CloneRequest) { r.Source = "" }},
		{"long source", func(r *pb.CloneRequest) { r.Source = strings.Repeat("x", 300) }},
		{"itself", func(r *pb.CloneRequest) { r.Source = tc.addrs[1] }},
		{"huge length", func(r *pb.CloneRequest) { r.Length = 1 << 62 }},
		{"negative length", func(r *pb.CloneRequest) { r.Length = -1 }},
	} {
		req := ok()
		tt.edit(req)
		if _, err := tc.cs(1).Clone(context.Background(), req); chunkfs.KindOf(err) != chunkfs.KindInvalid {
			t.Errorf("%s: %v, want KindInvalid", tt.name, err)
		}
	}
	tc.holdsNothing(1, 1)
}

// TestCloneThrottle measures a clone's bandwidth and the bound on clones
// in flight with the fake clock: the clock moves only while the clone
// waits for credit, so the fake time it takes is what the cap imposes.
func TestCloneThrottle(t *testing.T) {
	const rate = 1 << 20
	dirs := []string{t.TempDir(), t.TempDir()}
	tc := newTunedCluster(t, dirs, func(c *Config) { c.CloneRate, c.CloneStreams = rate, 1 })
	data := randBytes(rand.New(rand.NewPCG(7, 8)), 6<<20)
	tc.writeOn(0, 3, 1, data)
	tc.writeOn(0, 4, 1, []byte("small"))
	start := tc.clock.Now()
	refused := false
	err := tc.driveClock(func() error {
		_, err := tc.clone(1, 3, 1, 0, int64(len(data)))
		return err
	}, func() {
		if !refused {
			// The one clone slot is taken: another clone is refused.
			if _, err := tc.clone(1, 4, 1, 0, 5); chunkfs.KindOf(err) != chunkfs.KindUnavailable {
				t.Errorf("clone beyond CloneStreams: %v, want KindUnavailable", err)
			}
			refused = true
		}
	})
	if err != nil {
		t.Fatalf("throttled clone: %v", err)
	}
	// 6 MiB at 1 MiB/s with a 1 MiB burst: 5 s, give or take a step.
	if took := tc.clock.Now().Sub(start); took < 5*time.Second || took > 5*time.Second+200*time.Millisecond {
		t.Fatalf("6 MiB cloned in %v of fake time at 1 MiB/s", took)
	}
	if !refused {
		t.Fatal("a second clone was never tried")
	}
	if got := tc.replica(1, 3, 1); !bytes.Equal(got, data) {
		t.Fatal("throttled clone differs")
	}
	err = tc.driveClock(func() error {
		_, err := tc.clone(1, 4, 1, 0, 5)
		return err
	}, func() {})
	if err != nil {
		t.Fatalf("clone once the slot is free: %v", err)
	}
}

// driveClock runs fn, advancing the fake clock in small steps whenever a
// goroutine waits on a timer beyond the servers' own tickers, until fn
// returns; waiting runs each time before the clock moves.
func (tc *testCluster) driveClock(fn func() error, waiting func()) error {
	idle := tc.clock.Waiters()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		if tc.clock.Waiters() <= idle {
			time.Sleep(time.Millisecond) // not waiting on the clock yet
			continue
		}
		waiting()
		tc.clock.Advance(50 * time.Millisecond)
	}
}

func TestTokenBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newTokenBucket(1000, 500)
	steps := []struct {
		at   time.Duration
		n    int64
		wait time.Duration
	}{
		{0, 500, 0},                      // the burst
		{0, 250, 250 * time.Millisecond}, // in debt: wait for it to refill
		{250 * time.Millisecond, 0, 0},   // repaid
		{time.Hour, 500, 0},              // credit tops out at the burst
		{time.Hour, 1000, time.Second},   // larger than the burst: delayed, not refused
		{time.Hour - time.Second, 0, 999*time.Millisecond + time.Millisecond}, // time going back refills nothing
	}
	for i, s := range steps {
		if got := b.take(t0.Add(s.at), s.n); got != s.wait {
			t.Errorf("step %d: take(%v, %d) = %v, want %v", i, s.at, s.n, got, s.wait)
		}
	}
	free := newTokenBucket(0, 0)
	if d := free.take(t0, 1<<40); d != 0 {
		t.Errorf("unlimited bucket waits %v", d)
	}
}

// TestCloneLimiterBurstPerStream: two streams slowed by their sources pay
// for their pieces at once without waiting (the bucket holds a piece for
// each), and the rate holds after that.
func TestCloneLimiterBurstPerStream(t *testing.T) {
	const rate = 1 << 20
	c := clock.NewFake(time.Unix(1e9, 0))
	l := newCloneLimiter(c, 2, rate)
	c.Advance(3 * time.Second) // both pieces took 3 s to arrive
	for i := range 2 {
		if d := l.delay(c.Now(), clonePiece); d != 0 {
			t.Errorf("piece %d of the two streams waits %v, want none", i+1, d)
		}
	}
	if d := l.delay(c.Now(), clonePiece); d != time.Second {
		t.Errorf("a third piece at once waits %v, want 1s at the rate", d)
	}
}

func TestCloneOfNewerSourceFails(t *testing.T) {
	tc := newTestCluster(t, 2)
	tc.writeOn(0, 6, 3, []byte("version three"))
	if _, err := tc.clone(1, 6, 2, 0, 0); chunkfs.KindOf(err) != chunkfs.KindStale {
		t.Fatalf("clone at 2 from a source at 3: %v, want KindStale", err)
	}
	tc.holdsNothing(1, 6)
}

// TestCloneCopiesWhatIsAppendedMeanwhile: a clone reads its source to the
// end, so bytes appended while it runs are in the copy. (One appended
// after its last read fails it: the source's length is checked again
// before the copy is kept.)
func TestCloneCopiesWhatIsAppendedMeanwhile(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	tc := newTunedCluster(t, dirs, func(c *Config) { c.CloneRate = 1 << 20 })
	data := randBytes(rand.New(rand.NewPCG(9, 8)), 3<<20)
	tc.writeOn(0, 3, 1, data)
	grown := false
	err := tc.driveClock(func() error {
		_, err := tc.clone(1, 3, 1, 0, int64(len(data)))
		return err
	}, func() {
		if !grown {
			grown = true
			id := tc.newID()
			if err := tc.data.Push(context.Background(), tc.addrs[:1], id, []byte("appended")); err != nil {
				t.Error(err)
			}
			req := &pb.WriteRequest{Handle: 3, Version: 1, Offset: int64(len(data)), DataId: uint64(id), Length: 8}
			if _, err := tc.cs(0).Write(context.Background(), req); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatalf("clone of a source that grew: %v", err)
	}
	if got := tc.replica(1, 3, 1); !bytes.Equal(got, append(data, "appended"...)) {
		t.Fatalf("clone of %d bytes, want the %d appended to meanwhile", len(got), len(data)+8)
	}
}

// TestCloneReplacesCorruptReplica: a replica found corrupt is replaced by
// a clone at its own version, and is no longer reported.
func TestCloneReplacesCorruptReplica(t *testing.T) {
	tc := newTestCluster(t, 2)
	tc.grant(5, 1)
	data := randBytes(rand.New(rand.NewPCG(5, 1)), 150000)
	if err := tc.write(5, 1, 0, data); err != nil {
		t.Fatal(err)
	}
	flipByte(t, chunkFile(t, tc.dirs[1], 5), 100)
	if err := tc.servers[1].store.Verify(5); chunkfs.KindOf(err) != chunkfs.KindChecksum {
		t.Fatalf("rot not found: %v", err)
	}
	if _, err := tc.clone(1, 5, 1, 0, int64(len(data))); err != nil {
		t.Fatalf("clone over a corrupt replica: %v", err)
	}
	if got := tc.replica(1, 5, 1); !bytes.Equal(got, data) {
		t.Fatal("replica not replaced")
	}
	if b := tc.beatOf(1); len(b.Corrupt) != 0 {
		t.Fatalf("still reported corrupt: %v", b.Corrupt)
	}
}

// TestCloneFromHungSource: a source that accepts connections and never
// answers fails the clone within RPCTimeout and frees its slot.
func TestCloneFromHungSource(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			go io.Copy(io.Discard, conn) // reads, never answers
		}
	}()
	tc := newTunedCluster(t, []string{t.TempDir()}, func(c *Config) { c.RPCTimeout, c.CloneStreams = 300*time.Millisecond, 1 })
	for range 2 { // the second finds the slot free again
		_, err := tc.cs(0).Clone(context.Background(), &pb.CloneRequest{Handle: 2, Version: 1, Source: lis.Addr().String(), Length: 1})
		if chunkfs.KindOf(err) != chunkfs.KindUnavailable {
			t.Fatalf("clone from a hung source: %v, want KindUnavailable", err)
		}
	}
	tc.holdsNothing(0, 2)
}

// TestUrgentCloneCopiesReplica: an urgent clone (of a chunk with no other
// live replica) reads its source in urgent reads, unpaced, and copies it
// as any clone.
func TestUrgentCloneCopiesReplica(t *testing.T) {
	tc := newTestCluster(t, 2)
	data := randBytes(rand.New(rand.NewPCG(7, 8)), 1<<20+99)
	tc.writeOn(0, 8, 2, data)
	req := &pb.CloneRequest{Handle: 8, Version: 2, Source: tc.addrs[0], Length: int64(len(data)), Urgent: true}
	if resp, err := tc.cs(1).Clone(context.Background(), req); err != nil || resp.Length != int64(len(data)) {
		t.Fatalf("urgent clone: %v, %v", resp, err)
	}
	if got := tc.replica(1, 8, 2); !bytes.Equal(got, data) {
		t.Fatal("urgent clone differs from the source")
	}
}

// TestCloneReadsSourceAsMasterMarks: a clone the master marks urgent
// reads its source in urgent reads, none paced; one it does not mark
// reads it in background reads, each paced by the source's clone-source
// throttle. The source's read totals (its figures) show which reads each
// clone got, and that no clone read as a client does.
func TestCloneReadsSourceAsMasterMarks(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	tc := newTunedCluster(t, dirs, func(c *Config) { c.CloneSourceRate = 1 << 30 })
	data := randBytes(rand.New(rand.NewPCG(9, 10)), 2*clonePiece+99)
	tc.writeOn(0, 8, 2, data)
	for target, urgent := range map[int]bool{1: false, 2: true} {
		before := tc.servers[0].Figures().Reads
		req := &pb.CloneRequest{Handle: 8, Version: 2, Source: tc.addrs[0], Length: int64(len(data)), Urgent: urgent}
		if resp, err := tc.cs(target).Clone(context.Background(), req); err != nil || resp.Length != int64(len(data)) {
			t.Fatalf("clone (urgent %v): %v, %v", urgent, resp, err)
		}
		after := tc.servers[0].Figures().Reads
		got := rpc.ReadTotals{Foreground: after.Foreground - before.Foreground, Background: after.Background - before.Background,
			Urgent: after.Urgent - before.Urgent, Paced: after.Paced - before.Paced}
		want, kind := rpc.ReadTotals{Background: got.Background, Paced: got.Background}, "background reads, each paced"
		if urgent {
			want, kind = rpc.ReadTotals{Urgent: got.Urgent}, "urgent reads, none paced"
		}
		if got != want || got.Background+got.Urgent < 3 {
			t.Errorf("the source's reads for a clone (urgent %v): %+v, want only %s, one a piece (3)", urgent, got, kind)
		}
	}
}

// TestConfigRefusesNegativeCloneRates: neither clone throttle nor the
// urgent yield rate may be negative (0 is unlimited, or no yield).
func TestConfigRefusesNegativeCloneRates(t *testing.T) {
	for _, set := range []func(*Config){
		func(c *Config) { c.CloneRate = -1 },
		func(c *Config) { c.CloneSourceRate = -1 },
		func(c *Config) { c.UrgentYieldRate = -1 },
	} {
		c := DefaultConfig()
		c.Dirs = []string{t.TempDir()}
		if err := c.Validate(); err != nil {
			t.Fatalf("defaults: %v", err)
		}
		set(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("a negative clone rate was accepted: %d, %d", c.CloneRate, c.CloneSourceRate)
		}
	}
}
