package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

const healChunk = 256 << 10

// cloneLog records the master's clone events in order.
type cloneLog struct {
	mu     sync.Mutex // guards events
	events []master.CloneEvent
}

func (l *cloneLog) add(e master.CloneEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *cloneLog) all() []master.CloneEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// startHeal starts n chunkservers with 256 KiB chunks and returns the
// cluster, a client, the clone log and a context.
func startHeal(t *testing.T, n int, mutate func(*master.Config)) (*Cluster, *client.Client, *cloneLog, context.Context) {
	t.Helper()
	log := &cloneLog{}
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Chunkservers = n
	cfg.ChunkSize = healChunk
	cfg.Master = func(mc *master.Config) {
		mc.Placement.MinFree = 0
		mc.OnClone = log.add
		if mutate != nil {
			mutate(mc)
		}
	}
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
	return c, cl, log, ctx
}

func healBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func put(t *testing.T, ctx context.Context, c *client.Client, p string, data []byte) {
	t.Helper()
	f, err := c.Create(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func get(ctx context.Context, c *client.Client, p string) ([]byte, error) {
	f, err := c.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// waitHealed waits until fsck of / finds every chunk with its full
// replication and no clone is in flight.
func waitHealed(t *testing.T, ctx context.Context, c *client.Client) *client.FsckReport {
	t.Helper()
	for {
		r, err := c.Fsck(ctx, "/")
		rep, rerr := c.ClusterReport(ctx)
		if err == nil && rerr == nil && r.Healthy == r.Chunks && rep.BeingCloned == 0 && rep.UnderReplicated == 0 {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not healed: fsck %+v (%v), report %+v (%v)", r, err, rep, rerr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// serverIndex returns the index of the chunkserver at addr.
func serverIndex(c *Cluster, addr string) int {
	for i := range c.Chunkservers() {
		if c.ChunkserverAddr(i) == addr {
			return i
		}
	}
	return -1
}

// TestOverwriteWithSecondaryDownIsNeverUndone is the scenario: a
// secondary is killed, the chunk is overwritten and synced, the secondary
// comes back with its old copy at the old version. Every read, from every
// replica and every new client, returns the new bytes: the survivors moved
// to a new version before the write was acknowledged, so the old copy is
// stale, deleted, and replaced by a clone.
func TestOverwriteWithSecondaryDownIsNeverUndone(t *testing.T) {
	c, cl, _, ctx := startHeal(t, 3, nil)
	old := healBytes(1, 2*healChunk)
	put(t, ctx, cl, "/f", old)
	chunks, err := cl.Chunks(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	victim := -1
	for _, a := range chunks[0].Replicas {
		if a != chunks[0].Primary {
			victim = serverIndex(c, a)
			break
		}
	}
	if err := c.StopChunkserver(victim); err != nil {
		t.Fatal(err)
	}
	fresh := healBytes(2, 64<<10)
	f, err := cl.OpenFile(ctx, "/f", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(fresh, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartChunkserver(victim); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAlive(ctx, 3); err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(fresh), old[len(fresh):]...)
	for i := range 6 {
		rc, err := newDefaultClient(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := get(ctx, rc, "/f")
		rc.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %d after the secondary came back: %d bytes, err %v, new bytes: %v", i, len(got), err, err == nil && bytes.Equal(got[:len(fresh)], fresh))
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitHealed(t, ctx, cl)
	chunks, _ = cl.Chunks(ctx, "/f")
	dc := rpc.NewDataClient()
	defer dc.Close()
	buf := make([]byte, healChunk)
	for _, addr := range chunks[0].Replicas {
		n, err := dc.Read(ctx, addr, chunkfs.Handle(chunks[0].Handle), chunkfs.Version(chunks[0].Version), 0, buf)
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("replica %s: %v", addr, err)
		}
		if !bytes.Equal(buf[:n], want[:healChunk]) {
			t.Errorf("replica %s holds other bytes than the acknowledged overwrite", addr)
		}
	}
	if chunks[0].Version < 2 {
		t.Errorf("chunk version %d: the survivors were not moved on", chunks[0].Version)
	}
}

func newDefaultClient(ctx context.Context, c *Cluster) (*client.Client, error) {
	cfg := client.DefaultConfig()
	cfg.Master = c.MasterAddr()
	cfg.Caller = chunkfs.Root
	cfg.Security = c.Security()
	return client.New(ctx, cfg)
}

// TestOneOfFourKilledHeals: with one chunkserver of four gone, every chunk
// is cloned back to three replicas on the others, and reads back intact.
func TestOneOfFourKilledHeals(t *testing.T) {
	c, cl, log, ctx := startHeal(t, 4, nil)
	files := map[string][]byte{}
	for i := range 8 {
		p := fmt.Sprintf("/f%d", i)
		files[p] = healBytes(uint64(10+i), 2*healChunk-1000)
		put(t, ctx, cl, p, files[p])
	}
	stopped := time.Now()
	if err := c.StopChunkserver(3); err != nil {
		t.Fatal(err)
	}
	dead := c.ChunkserverAddr(3)
	// Wait for the death to be noticed, then for the healing.
	for {
		rep, err := cl.ClusterReport(ctx)
		if err == nil && rep.UnderReplicated+rep.BeingCloned > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the dead server was never noticed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := waitHealed(t, ctx, cl)
	healed := time.Since(stopped)
	if r.Chunks != 16 {
		t.Errorf("fsck saw %d chunks, want 16", r.Chunks)
	}
	for p, want := range files {
		chunks, err := cl.Chunks(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range chunks {
			if len(ch.Replicas) != 3 || slices.Contains(ch.Replicas, dead) {
				t.Errorf("%s chunk %d: replicas %v", p, ch.Index, ch.Replicas)
			}
		}
		if got, err := get(ctx, cl, p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v", p, len(got), err)
		}
	}
	clones := 0
	for _, e := range log.all() {
		if e.Done && e.Err == nil {
			clones++
		}
	}
	t.Logf("%d clones; every chunk back to 3 replicas %v after the kill (dead-after 1 s)", clones, healed.Round(time.Millisecond))
}

// TestTwoOfFiveKilledOneReplicaChunksFirst: with two of five chunkservers
// gone, the chunks left with one replica are all healed before any clone
// of a chunk with two starts.
//
// The master runs on a fake clock, still while the two are stopped (which
// takes as long as it takes), so both fall silent at the same fake instant
// and are declared dead by the same check; then the clock moves 100 ms
// every 150 ms of real time, slowly enough that the live servers' real
// heartbeats keep them alive under any load a CI machine has.
func TestTwoOfFiveKilledOneReplicaChunksFirst(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	c, cl, log, ctx := startHeal(t, 5, func(mc *master.Config) {
		mc.MaxClonesPerServer = 1
		mc.DeadAfter = 3 * time.Second
		mc.Clock = fake
	})
	for i := range 30 {
		put(t, ctx, cl, fmt.Sprintf("/g%02d", i), healBytes(uint64(100+i), healChunk/2))
	}
	if err := c.StopChunkserver(0); err != nil {
		t.Fatal(err)
	}
	if err := c.StopChunkserver(1); err != nil {
		t.Fatal(err)
	}
	ticking := make(chan struct{})
	defer close(ticking)
	go func() {
		for {
			select {
			case <-ticking:
				return
			case <-time.After(150 * time.Millisecond):
				fake.Advance(100 * time.Millisecond)
			}
		}
	}()
	for {
		rep, err := cl.ClusterReport(ctx)
		if err == nil && rep.UnderReplicated == 0 && rep.BeingCloned == 0 && rep.Repaired > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("not healed: %+v", rep)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitHealed(t, ctx, cl)
	events := log.all()
	first := slices.IndexFunc(events, func(e master.CloneEvent) bool { return !e.Done && e.Live == 1 })
	if first < 0 {
		t.Fatalf("no chunk was left with one replica; the test proves nothing: %+v", events)
	}
	if first != 0 {
		t.Errorf("%d clone events before the first of a one-replica chunk: the deaths were not seen together", first)
	}
	ones := map[chunkfs.Handle]bool{}
	for _, e := range events[first:] {
		if !e.Done && e.Live == 1 {
			ones[e.Handle] = true
		}
	}
	healed := map[chunkfs.Handle]bool{}
	for i, e := range events[first:] {
		switch {
		case e.Done && e.Live == 1 && e.Err == nil:
			healed[e.Handle] = true
		case !e.Done && e.Live >= 2 && len(healed) < len(ones):
			t.Fatalf("event %d: clone of two-replica chunk %d started with %d of %d one-replica chunks healed", first+i, e.Handle, len(healed), len(ones))
		}
	}
	t.Logf("%d one-replica chunks healed first; %d events", len(ones), len(events))
}

// TestMasterRestartUnderWrites: a master restarted under a stream of
// writes creates no chunk on fewer than the minimum replicas (safe mode
// holds creations until the chunkservers have reported), and every
// acknowledged write reads back whole.
func TestMasterRestartUnderWrites(t *testing.T) {
	c, cl, log, ctx := startHeal(t, 3, nil)
	type file struct {
		path string
		data []byte
	}
	var mu sync.Mutex // guards acked and failed
	var acked []file
	failed, after := 0, 0
	var restarted atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := fmt.Sprintf("/w%d-%04d", w, i)
				late := restarted.Load()
				data := healBytes(uint64(w*10000+i), 10000)
				err := func() error {
					f, err := cl.Create(ctx, p)
					if err != nil {
						return err
					}
					if _, err := f.Write(data); err != nil {
						f.Close()
						return err
					}
					return f.Close()
				}()
				mu.Lock()
				if err == nil {
					acked = append(acked, file{p, data})
					if late {
						after++
					}
				} else {
					if failed < 5 {
						t.Logf("%s: %v", p, err)
					}
					failed++
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // the master is down: do not spin
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	if err := c.RestartMaster(); err != nil {
		t.Fatal(err)
	}
	restarted.Store(true)
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged")
	}
	ackedChunks := map[chunkfs.Handle]bool{}
	for _, f := range acked {
		got, err := get(ctx, cl, f.path)
		if err != nil || !bytes.Equal(got, f.data) {
			t.Fatalf("%s: acknowledged, read back %d bytes (%v)", f.path, len(got), err)
		}
		chunks, err := cl.Chunks(ctx, f.path)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range chunks {
			ackedChunks[chunkfs.Handle(ch.Handle)] = true
			if len(ch.Replicas) < 2 {
				t.Errorf("%s chunk %d: %d replicas", f.path, ch.Index, len(ch.Replicas))
			}
		}
	}
	// Clones from one replica can happen here without any write having
	// been acknowledged on one: a chunkserver slow to heartbeat the new
	// master (its connection backs off while the master is down) may be
	// declared dead for a moment. They are counted, not failed on; the
	// rule itself is tested in the master package (TestMinimumReplicas).
	low := 0
	for _, e := range log.all() {
		if !e.Done && e.Live < 2 && ackedChunks[e.Handle] {
			low++
		}
	}
	t.Logf("%d clones of acknowledged chunks from one replica", low)
	if after == 0 {
		t.Error("no file created after the restart was acknowledged")
	}
	t.Logf("%d writes acknowledged (%d begun after the restart), %d failed", len(acked), after, failed)
}

// TestKilledPrimaryMovesLeaseFast: with 30 s leases, a writer whose
// primary is killed goes on within 5 s: it names the primary to the
// master, which probes it, finds it gone, and grants the lease to the
// other replicas at a new version (the old primary is fenced off).
func TestKilledPrimaryMovesLeaseFast(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.ChunkSize = healChunk
	cfg.Lease = 30 * time.Second
	cfg.DeadAfter = 20 * time.Second
	cfg.Master = func(mc *master.Config) { mc.Placement.MinFree = 0 }
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := newDefaultClient(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f, err := cl.Create(ctx, "/p")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first := healBytes(3, 64<<10)
	if _, err := f.WriteAt(first, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	chunks, err := cl.Chunks(ctx, "/p")
	if err != nil || len(chunks) != 1 || chunks[0].Primary == "" {
		t.Fatalf("chunks %+v, %v", chunks, err)
	}
	old := chunks[0]
	if err := c.StopChunkserver(serverIndex(c, old.Primary)); err != nil {
		t.Fatal(err)
	}
	second := healBytes(4, 64<<10)
	start := time.Now()
	if _, err := f.WriteAt(second, 64<<10); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if took > 5*time.Second {
		t.Errorf("the write after the primary died took %v", took)
	}
	chunks, _ = cl.Chunks(ctx, "/p")
	if chunks[0].Version <= old.Version || slices.Contains(chunks[0].Replicas, old.Primary) {
		t.Errorf("after the move: %+v (before %+v)", chunks[0], old)
	}
	got, err := get(ctx, cl, "/p")
	if err != nil || !bytes.Equal(got, append(slices.Clone(first), second...)) {
		t.Errorf("read back %d bytes, %v", len(got), err)
	}
	t.Logf("writer delayed %v by the primary's death", took.Round(time.Millisecond))
}

// TestCorruptReplicaReplaced: a replica with a flipped byte is found by a
// read, reported, deleted, and replaced by a clone of a good one.
func TestCorruptReplicaReplaced(t *testing.T) {
	c, cl, _, ctx := startHeal(t, 4, nil)
	data := healBytes(5, healChunk)
	put(t, ctx, cl, "/c", data)
	chunks, err := cl.Chunks(ctx, "/c")
	if err != nil {
		t.Fatal(err)
	}
	ch := chunks[0]
	bad := serverIndex(c, ch.Replicas[0])
	if err := c.CorruptReplica(bad, chunkfs.Handle(ch.Handle), 1000); err != nil {
		t.Fatal(err)
	}
	// Reads go to the nearest replica first; read until one has met the
	// bad block (each fresh client may pick another).
	dc := rpc.NewDataClient()
	defer dc.Close()
	buf := make([]byte, healChunk)
	if _, err := dc.Read(ctx, ch.Replicas[0], chunkfs.Handle(ch.Handle), chunkfs.Version(ch.Version), 0, buf); chunkfs.KindOf(err) != chunkfs.KindChecksum {
		t.Fatalf("reading the corrupt replica: %v", err)
	}
	for {
		got, err := get(ctx, cl, "/c")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read with a corrupt replica: %d bytes, %v", len(got), err)
		}
		now, _ := cl.Chunks(ctx, "/c")
		if !slices.Contains(now[0].Replicas, ch.Replicas[0]) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the corrupt replica was never dropped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitHealed(t, ctx, cl)
	chunks, _ = cl.Chunks(ctx, "/c")
	if len(chunks[0].Replicas) != 3 {
		t.Fatalf("replicas after the repair: %v", chunks[0].Replicas)
	}
	for _, addr := range chunks[0].Replicas {
		n, err := dc.Read(ctx, addr, chunkfs.Handle(ch.Handle), chunkfs.Version(chunks[0].Version), 0, buf)
		if (err != nil && !errors.Is(err, io.EOF)) || !bytes.Equal(buf[:n], data) {
			t.Errorf("replica %s after the repair: %d bytes, %v", addr, n, err)
		}
	}
}

// TestReturningServerTrimmed: a server that comes back after its chunks
// were cloned elsewhere makes them over-replicated; the excess replicas
// are removed, leaving every chunk at three.
func TestReturningServerTrimmed(t *testing.T) {
	c, cl, _, ctx := startHeal(t, 4, nil)
	for i := range 6 {
		put(t, ctx, cl, fmt.Sprintf("/t%d", i), healBytes(uint64(200+i), healChunk))
	}
	if err := c.StopChunkserver(2); err != nil {
		t.Fatal(err)
	}
	for {
		rep, err := cl.ClusterReport(ctx)
		if err == nil && rep.Repaired > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no clone after a death")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitHealed(t, ctx, cl)
	if err := c.RestartChunkserver(2); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAlive(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for {
		over := 0
		for i := range 6 {
			chunks, err := cl.Chunks(ctx, fmt.Sprintf("/t%d", i))
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range chunks {
				if len(ch.Replicas) < 3 {
					t.Fatalf("chunk %d fell to %v while trimming", ch.Handle, ch.Replicas)
				}
				if len(ch.Replicas) > 3 {
					over++
				}
			}
		}
		rep, _ := cl.ClusterReport(ctx)
		if over == 0 && rep != nil && rep.UnderReplicated == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d chunks still over-replicated", over)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLastReplicaUnderLeaseClonedAtOnce: a writer's chunk whose
// secondaries die is cloned from its primary well before the writer's
// 60 s lease could end (the master revokes it), and the clone holds every
// acknowledged write: with the primary stopped too, the clone alone reads
// back the writes from before and after it.
func TestLastReplicaUnderLeaseClonedAtOnce(t *testing.T) {
	lastReplicaClonedAtOnce(t, true)
}

// TestLostPrimaryLastReplicaClonedAtOnce: a writer's chunk whose primary
// and one secondary die is cloned from the secondary left well before the
// writer's 60 s lease could end (the master fences the lost primary off by
// moving that replica to the next version), the writer writes on once the
// clone is counted, and the clone holds every acknowledged write: with the
// secondary stopped too, the clone alone reads back the writes from before
// and after it.
func TestLostPrimaryLastReplicaClonedAtOnce(t *testing.T) {
	lastReplicaClonedAtOnce(t, false)
}

// lastReplicaClonedAtOnce stops all but one replica of a written chunk
// under a writer's minute-long lease — the primary's when keepPrimary,
// else a secondary's — waits (20 s at most) for the clone of that last
// replica, writes on, and reads everything back from the clone alone.
func lastReplicaClonedAtOnce(t *testing.T, keepPrimary bool) {
	c, cl, log, ctx := startHeal(t, 4, func(mc *master.Config) { mc.LeaseDuration = time.Minute })
	f, err := cl.Create(ctx, "/w")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first := healBytes(7, 64<<10)
	if _, err := f.WriteAt(first, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	chunks, err := cl.Chunks(ctx, "/w")
	if err != nil || len(chunks) != 1 || chunks[0].Primary == "" || len(chunks[0].Replicas) != 3 {
		t.Fatalf("chunks %+v, %v", chunks, err)
	}
	left := chunks[0].Primary
	if !keepPrimary {
		left = slices.DeleteFunc(slices.Clone(chunks[0].Replicas), func(a string) bool { return a == left })[0]
	}
	for _, addr := range chunks[0].Replicas {
		if addr == left {
			continue
		}
		if err := c.StopChunkserver(serverIndex(c, addr)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for !slices.ContainsFunc(log.all(), func(e master.CloneEvent) bool { return e.Done && e.Err == nil && e.Live == 1 }) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the last replica (%s) under a writer's lease not cloned in 20 s: %+v", left, log.all())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("cloned %v after the other replicas stopped", time.Since(start).Round(time.Millisecond))
	second := healBytes(8, 64<<10)
	if _, err := f.WriteAt(second, 64<<10); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := c.StopChunkserver(serverIndex(c, left)); err != nil {
		t.Fatal(err)
	}
	got, err := get(ctx, cl, "/w")
	if want := append(slices.Clone(first), second...); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the clone alone reads back %d bytes (want %d), %v", len(got), len(want), err)
	}
}
