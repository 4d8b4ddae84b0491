package chunkserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

func randBytes(r *rand.Rand, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

// sameReplicas fails unless every server holds byte-identical chunk h.
func (tc *testCluster) sameReplicas(h chunkfs.Handle, v chunkfs.Version) []byte {
	tc.t.Helper()
	first := tc.replica(0, h, v)
	for i := 1; i < len(tc.servers); i++ {
		if got := tc.replica(i, h, v); !bytes.Equal(got, first) {
			tc.t.Fatalf("replica %d differs from replica 0 (%d vs %d bytes)", i, len(got), len(first))
		}
	}
	return first
}

func TestWriteLandsOnAllReplicas(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.grant(1, 1)
	r := rand.New(rand.NewPCG(1, 1))
	want := []byte{}
	for _, w := range []struct{ off, n int }{{0, 100}, {100, 3 * chunkfs.BlockSize}, {50, 10}, {chunkfs.BlockSize - 3, 7}, {300000, 5}} {
		p := randBytes(r, w.n)
		if err := tc.write(1, 1, int64(w.off), p); err != nil {
			t.Fatalf("write %d at %d: %v", w.n, w.off, err)
		}
		if end := w.off + w.n; end > len(want) {
			want = append(want, make([]byte, end-len(want))...)
		}
		copy(want[w.off:], p)
	}
	if got := tc.sameReplicas(1, 1); !bytes.Equal(got, want) {
		t.Fatal("replicas hold other bytes than were written")
	}
	if _, err := tc.cs(0).Sync(context.Background(), &pb.SyncRequest{Handle: 1, Version: 1, Secondaries: tc.addrs[1:]}); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

func TestWriteErrors(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.grant(1, 2)
	ctx := context.Background()
	id, _ := tc.push([]byte("abc"))
	try := func(i int, req *pb.WriteRequest) chunkfs.Kind {
		_, err := tc.cs(i).Write(ctx, req)
		return chunkfs.KindOf(err)
	}
	ok := func() *pb.WriteRequest {
		return &pb.WriteRequest{Handle: 1, Version: 2, DataId: uint64(id), Length: 3, Secondaries: tc.addrs[1:]}
	}
	req := ok()
	if k := try(1, req); k != chunkfs.KindNotPrimary {
		t.Errorf("write to a secondary: %v", k)
	}
	req = ok()
	req.Version = 1
	if k := try(0, req); k != chunkfs.KindNotPrimary {
		t.Errorf("write at an old version: %v", k)
	}
	req = ok()
	req.Length = 4
	if k := try(0, req); k != chunkfs.KindInvalid {
		t.Errorf("length differs from the push: %v", k)
	}
	req = ok()
	req.DataId = 999
	if k := try(0, req); k != chunkfs.KindUnavailable {
		t.Errorf("unknown data: %v", k)
	}
	req = ok()
	req.Offset = -1
	if k := try(0, req); k != chunkfs.KindInvalid {
		t.Errorf("negative offset: %v", k)
	}
	if k := try(0, ok()); k != chunkfs.KindOther && k != 0 {
		t.Errorf("good write: %v", k)
	}
	tc.clock.Advance(61 * time.Second)
	if k := try(0, ok()); k != chunkfs.KindNotPrimary {
		t.Errorf("write after the lease expired: %v", k)
	}
	if _, err := tc.cs(0).Lease(ctx, &pb.LeaseRequest{Handle: 1, Version: 1}); chunkfs.KindOf(err) != chunkfs.KindStale {
		t.Errorf("lease at an older version: %v", err)
	}
	_, err := tc.data.Read(ctx, tc.addrs[1], 1, 3, 0, make([]byte, 1))
	if chunkfs.KindOf(err) != chunkfs.KindStale {
		t.Errorf("read wanting a newer version: %v", err)
	}
	_, err = tc.data.Read(ctx, tc.addrs[1], 77, 1, 0, make([]byte, 1))
	if chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Errorf("read of an unknown chunk: %v", err)
	}
}

// TestMutationOutlivingItsLeaseFails: a write whose secondary applies it
// only after the primary's lease ended is not acknowledged: the master,
// seeing the lease end, may have started a clone that missed it.
func TestMutationOutlivingItsLeaseFails(t *testing.T) {
	tc := newTunedCluster(t, []string{t.TempDir(), t.TempDir(), t.TempDir()}, func(c *Config) { c.BufferExpiry = time.Hour })
	tc.grant(1, 1)
	held := tc.servers[1].state(1)
	held.order.Lock() // the secondary's apply waits
	done := make(chan error, 1)
	go func() { done <- tc.write(1, 1, 0, []byte("late")) }()
	primary := tc.servers[0].state(1)
	for primary.order.TryLock() { // until the primary is in the mutation
		primary.order.Unlock()
		time.Sleep(time.Millisecond)
	}
	tc.clock.Advance(61 * time.Second)
	held.order.Unlock()
	if err := <-done; chunkfs.KindOf(err) != chunkfs.KindNotPrimary {
		t.Fatalf("a write that outlived its lease: %v, want refused as not primary", err)
	}
	tc.grant(1, 2)
	if err := tc.write(1, 2, 0, []byte("again")); err != nil {
		t.Fatalf("the retry under a new lease: %v", err)
	}
}

// TestFencedSecondaryRefusesItsLostPrimary: the master fences off a
// primary it lost by moving a secondary to the next version with no lease
// (a repair's fence, a snapshot's revocation). The primary still holds
// its lease at the old version, but a write through it is no longer
// acknowledged, and the fenced replica does not take it.
func TestFencedSecondaryRefusesItsLostPrimary(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.grant(1, 1)
	if err := tc.write(1, 1, 0, []byte("before")); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.cs(1).Lease(context.Background(), &pb.LeaseRequest{Handle: 1, Version: 2}); err != nil {
		t.Fatalf("fence: %v", err)
	}
	err := tc.write(1, 1, 0, []byte("lost!!"))
	if chunkfs.KindOf(err) != chunkfs.KindStale {
		t.Fatalf("a write through the lost primary after the fence: %v, want refused as stale", err)
	}
	if !strings.Contains(err.Error(), "secondary "+tc.addrs[1]) {
		t.Errorf("the writer's error %q does not name the secondary that refused, %s", err, tc.addrs[1])
	}
	if got := tc.replica(1, 1, 2); !bytes.Equal(got, []byte("before")) {
		t.Fatalf("the fenced replica holds %q, want %q", got, "before")
	}
}

// TestConcurrentWritersSameRegion has writers overwrite one region at once;
// the primary orders them, so every replica ends byte-identical.
func TestConcurrentWritersSameRegion(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.grant(1, 1)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for range 10 {
				off := r.Int64N(100000)
				if err := tc.write(1, 1, off, randBytes(r, 1+r.IntN(150000))); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	tc.sameReplicas(1, 1)
}

// record is an appended record: an 8-byte writer/sequence tag, a length and
// a CRC32C, then the body.
func record(r *rand.Rand, writer, seq int) []byte {
	body := randBytes(r, 1+r.IntN(40000))
	p := binary.LittleEndian.AppendUint32(nil, uint32(writer))
	p = binary.LittleEndian.AppendUint32(p, uint32(seq))
	p = binary.LittleEndian.AppendUint32(p, uint32(len(body)))
	p = binary.LittleEndian.AppendUint32(p, checksum.Sum(body))
	return append(p, body...)
}

// TestConcurrentAppends has 16 appenders append records to a file of small
// chunks (the test plays the master, adding a chunk when one is full),
// pushing each record at once or reserving its room first: every
// acknowledged record is then found whole at its offset on every replica,
// and the replicas are identical. Without reservations every chunk but the
// last is padded full; with them, no record whose room was reserved is
// refused at its Append.
func TestConcurrentAppends(t *testing.T) {
	for _, reserve := range []bool{false, true} {
		t.Run(fmt.Sprintf("reserve=%v", reserve), func(t *testing.T) { concurrentAppends(t, reserve) })
	}
}

func concurrentAppends(t *testing.T, reserve bool) {
	const chunkSize = 256 << 10
	tc := newTestCluster(t, 3)
	var mu sync.Mutex // guards last
	last := chunkfs.Handle(1)
	tc.grant(last, 1)
	type ack struct {
		h   chunkfs.Handle
		off int64
		rec []byte
	}
	acks := make(chan ack, 16*20)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 3))
			for seq := 0; seq < 20; seq++ {
				rec := record(r, w, seq)
				for {
					mu.Lock()
					h := last
					mu.Unlock()
					var off int64
					var reserved bool
					var err error
					if reserve {
						off, reserved, err = tc.reserveAndAppend(h, 1, chunkSize, rec)
					} else {
						off, err = tc.appendRecord(h, 1, chunkSize, rec)
					}
					if err == nil {
						acks <- ack{h, off, rec}
						break
					}
					if chunkfs.KindOf(err) != chunkfs.KindChunkFull || reserved {
						t.Errorf("append (room reserved: %v): %v", reserved, err)
						return
					}
					mu.Lock()
					if last == h {
						last++
						tc.grant(last, 1)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(acks)
	chunks := map[chunkfs.Handle][]byte{}
	for h := chunkfs.Handle(1); h <= last; h++ {
		chunks[h] = tc.sameReplicas(h, 1)
		if !reserve && h < last && len(chunks[h]) != chunkSize {
			t.Errorf("full chunk %d is %d bytes, not padded to %d", h, len(chunks[h]), chunkSize)
		}
	}
	n := 0
	for a := range acks {
		n++
		c := chunks[a.h]
		if a.off+int64(len(a.rec)) > int64(len(c)) || !bytes.Equal(c[a.off:a.off+int64(len(a.rec))], a.rec) {
			t.Fatalf("acknowledged record at chunk %d offset %d is not there whole", a.h, a.off)
		}
	}
	if n != 16*20 || last < 2 {
		t.Fatalf("%d records acknowledged over %d chunks; want 320 over several", n, last)
	}
}

func TestAppendPadsWhenFull(t *testing.T) {
	const chunkSize = 256 << 10
	tc := newTestCluster(t, 3)
	tc.grant(1, 1)
	rec := bytes.Repeat([]byte{7}, chunkSize/4)
	for i := 0; i < 4; i++ {
		off, err := tc.appendRecord(1, 1, chunkSize, rec[:len(rec)-1])
		if err != nil || off != int64(i*(len(rec)-1)) {
			t.Fatalf("append %d: offset %d, %v", i, off, err)
		}
	}
	_, err := tc.appendRecord(1, 1, chunkSize, rec)
	if chunkfs.KindOf(err) != chunkfs.KindChunkFull {
		t.Fatalf("append that does not fit: %v, want KindChunkFull", err)
	}
	got := tc.sameReplicas(1, 1)
	if len(got) != chunkSize || !bytes.Equal(got[4*(len(rec)-1):], make([]byte, 4)) {
		t.Fatalf("chunk is %d bytes, not padded with zeros to %d", len(got), chunkSize)
	}
	if _, err := tc.appendRecord(1, 1, chunkSize, append(rec, 1)); chunkfs.KindOf(err) != chunkfs.KindTooLarge {
		t.Fatalf("record over a quarter chunk: %v", err)
	}
}

// chunkFile finds the data file of chunk h in dir.
func chunkFile(t *testing.T, dir string, h chunkfs.Handle) string {
	p := filepath.Join(dir, fmt.Sprintf("%02x", uint64(h)&0xff), fmt.Sprintf("%016x.data", uint64(h)))
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func flipByte(t *testing.T, file string, off int64) {
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	f.ReadAt(b[:], off)
	b[0] ^= 0xff
	f.WriteAt(b[:], off)
}

func TestFlippedByteDetectedAndReported(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.grant(5, 1)
	data := randBytes(rand.New(rand.NewPCG(5, 5)), 200000)
	if err := tc.write(5, 1, 0, data); err != nil {
		t.Fatal(err)
	}
	flipByte(t, chunkFile(t, tc.dirs[2], 5), 150000)
	ctx := context.Background()
	p := make([]byte, len(data))
	_, err := tc.data.Read(ctx, tc.addrs[2], 5, 1, 0, p)
	if chunkfs.KindOf(err) != chunkfs.KindChecksum {
		t.Fatalf("read of the flipped replica: %v, want KindChecksum", err)
	}
	tc.master.wait(t, "corrupt")
	tc.master.mu.Lock()
	rep := tc.master.corrupt[0]
	tc.master.mu.Unlock()
	if rep.Handle != 5 || rep.Replica != tc.addrs[2] {
		t.Fatalf("reported %+v", rep)
	}
	// Another replica still serves the right data.
	if n, err := tc.data.Read(ctx, tc.addrs[1], 5, 1, 0, p); err != nil || n != len(data) || !bytes.Equal(p, data) {
		t.Fatalf("good replica: %d bytes, %v", n, err)
	}
	// The next heartbeat lists the replica as corrupt; the master's garbage
	// answer deletes it.
	tc.master.mu.Lock()
	tc.master.garbage = []uint64{5}
	tc.master.mu.Unlock()
	tc.clock.Advance(3 * time.Second)
	for range 3 {
		tc.master.wait(t, "heartbeat")
	}
	tc.master.mu.Lock()
	found := false
	for _, b := range tc.master.beats {
		found = found || b.Addr == tc.addrs[2] && slices.Contains(b.Corrupt, 5)
	}
	tc.master.mu.Unlock()
	if !found {
		t.Fatal("heartbeat did not list the corrupt replica")
	}
}

func TestHeartbeatsAndReregister(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.grant(9, 1)
	if err := tc.write(9, 1, 0, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	tc.master.mu.Lock()
	tc.master.extend = []uint64{9}
	tc.master.mu.Unlock()
	tc.clock.Advance(3 * time.Second)
	tc.master.wait(t, "heartbeat")
	b := tc.master.lastBeat()
	if b.Capacity <= 0 || b.Used != 5 || len(b.Sample) != 1 || b.Sample[0].Handle != 9 || !slices.Contains(b.ExtendLeases, 9) {
		t.Fatalf("heartbeat %+v", b)
	}
	// The lease, extended by 60 s at t+3 s, is still valid at t+62 s.
	tc.clock.Advance(59 * time.Second)
	tc.master.wait(t, "heartbeat")
	info, err := tc.cs(0).ChunkInfo(context.Background(), &pb.ChunkInfoRequest{Handle: 9})
	if err != nil || !info.Primary || info.Length != 5 {
		t.Fatalf("chunk info after extension: %+v, %v", info, err)
	}
	tc.master.mu.Lock()
	tc.master.reregister = true
	tc.master.mu.Unlock()
	tc.clock.Advance(3 * time.Second)
	tc.master.wait(t, "heartbeat")
	tc.master.wait(t, "register") // at once: the clock has not moved
	tc.master.mu.Lock()
	reg := tc.master.registered[tc.addrs[0]]
	tc.master.mu.Unlock()
	if len(reg.Chunks) != 1 || reg.Chunks[0].Length != 5 || reg.Id != tc.servers[0].ID() {
		t.Fatalf("re-registration %+v", reg)
	}
}

// TestReregisterBacksOff checks that a registration the master asks for
// is sent at once, and that one refused is tried again at the next tick,
// not before: the fake clock stands still until the test moves it.
func TestReregisterBacksOff(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.master.mu.Lock()
	tc.master.reregister, tc.master.failRegs = true, 1
	tc.master.mu.Unlock()
	tc.clock.Advance(3 * time.Second)
	asked := tc.clock.Now()
	tc.master.wait(t, "heartbeat")
	tc.master.wait(t, "register refused")
	tc.clock.Advance(3 * time.Second)
	tc.master.wait(t, "register")
	tc.master.mu.Lock()
	times := slices.Clone(tc.master.regTimes)
	tc.master.mu.Unlock()
	want := []time.Time{times[0], asked, asked.Add(3 * time.Second)}
	if !slices.EqualFunc(times, want, time.Time.Equal) {
		t.Fatalf("registrations at %v, want the first, then at once when asked (%v), then a tick later", times, asked)
	}
}

func TestRestartKeepsIDAndChunks(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.grant(3, 4)
	tc.write(3, 4, 0, []byte("persist"))
	id := tc.servers[0].ID()
	tc.servers[0].Close()
	tc.start(0)
	tc.master.wait(t, "register")
	tc.master.mu.Lock()
	reg := tc.master.registered[tc.addrs[0]]
	tc.master.mu.Unlock()
	if reg.Id != id || len(reg.Chunks) != 1 || reg.Chunks[0].Version != 4 || reg.Chunks[0].Length != 7 {
		t.Fatalf("after restart: %+v (id was %s)", reg, id)
	}
	if got := tc.replica(0, 3, 4); string(got) != "persist" {
		t.Fatalf("after restart chunk holds %q", got)
	}
}

func TestTruncateAndDelete(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.grant(3, 1)
	tc.write(3, 1, 0, []byte("0123456789"))
	ctx := context.Background()
	if _, err := tc.cs(0).Truncate(ctx, &pb.TruncateRequest{Handle: 3, Version: 2, Length: 4}); err != nil {
		t.Fatal(err)
	}
	if got := tc.replica(0, 3, 2); string(got) != "0123" {
		t.Fatalf("after truncate: %q", got)
	}
	if _, err := tc.cs(0).DeleteChunks(ctx, &pb.DeleteChunksRequest{Handles: []uint64{3, 99}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.cs(0).ChunkInfo(ctx, &pb.ChunkInfoRequest{Handle: 3}); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("deleted chunk: %v", err)
	}
}

func TestApplyRefusesOutOfOrderSerial(t *testing.T) {
	tc := newTestCluster(t, 2)
	tc.grant(1, 1)
	ctx := context.Background()
	apply := func(serial uint64) error {
		_, err := tc.cs(1).Apply(ctx, &pb.ApplyRequest{Handle: 1, Version: 1, Serial: serial, Offset: 0, Length: 10, Pad: true})
		return err
	}
	if err := apply(5); err != nil {
		t.Fatal(err)
	}
	if err := apply(5); chunkfs.KindOf(err) != chunkfs.KindInvalid {
		t.Fatalf("repeated serial: %v", err)
	}
	if err := apply(6); err != nil {
		t.Fatal(err)
	}
}

func TestBufferBoundAndExpiry(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	b := newBuffer(c, 256<<10, time.Minute)
	buf, done, err := b.reserve(1, 128<<10)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "pushed")
	if _, _, _, err := b.take(1, 128<<10); chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("data taken before it all arrived: %v", err)
	}
	done(nil, true)
	if _, _, err := b.reserve(2, 129<<10); chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("push beyond the bound: %v", err)
	}
	if _, _, _, err := b.take(1, 10); chunkfs.KindOf(err) != chunkfs.KindInvalid {
		t.Fatalf("take with the wrong length: %v", err)
	}
	data, _, release, err := b.take(1, 128<<10)
	if err != nil || string(data[:6]) != "pushed" {
		t.Fatalf("take: %q, %v", data[:6], err)
	}
	if _, _, _, err := b.take(1, 128<<10); chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("data taken twice: %v", err)
	}
	if b.usage() != 128<<10 {
		t.Fatalf("taken data not counted until released: %d", b.usage())
	}
	release()
	_, done, err = b.reserve(2, 129<<10)
	if err != nil {
		t.Fatalf("released data still counted: %v", err)
	}
	done(nil, true)
	c.Advance(time.Minute)
	b.expire()
	if b.usage() != 0 {
		t.Fatalf("%d bytes held after expiry", b.usage())
	}
	_, done, _ = b.reserve(3, 10)
	done(nil, false)
	if _, _, _, err := b.take(3, 10); err == nil || b.usage() != 0 {
		t.Fatal("failed push kept")
	}
	// Expiry needs no sweep: a push that does not fit drops expired data.
	_, done, _ = b.reserve(4, 100<<10)
	done(nil, true)
	c.Advance(time.Minute)
	if _, _, err := b.reserve(5, 256<<10); err != nil {
		t.Fatalf("expired data not dropped for a new push: %v", err)
	}
}

// A push slower than the expiry is kept, and its data expires the expiry
// after the last of it arrived, not after the push began.
func TestBufferExpiryCountsFromArrival(t *testing.T) {
	c := clock.NewFake(time.Unix(0, 0))
	b := newBuffer(c, 1<<20, time.Minute)
	_, done, err := b.reserve(1, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(90 * time.Second) // a congested network: the push takes 90 s
	b.expire()
	done(nil, true)
	c.Advance(time.Minute - time.Second)
	b.expire()
	if _, _, release, err := b.take(1, 64<<10); err != nil {
		t.Fatalf("data 59 s after it arrived, 149 s after its push began: %v", err)
	} else {
		release()
	}
	_, done, _ = b.reserve(2, 64<<10)
	c.Advance(10 * time.Second)
	done(nil, true)
	c.Advance(time.Minute)
	b.expire()
	if _, _, _, err := b.take(2, 64<<10); chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Fatalf("data held a minute after it arrived: %v", err)
	}
	if b.usage() != 0 {
		t.Fatalf("%d bytes held after expiry", b.usage())
	}
}

func TestBufferSizeClasses(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want int
	}{{1, -1}, {64<<10 - 1, -1}, {64 << 10, 0}, {64<<10 + 1, 1}, {1 << 20, 4}, {64 << 20, numClasses - 1}, {64<<20 + 1, -1}} {
		if got := class(tc.n); got != tc.want {
			t.Errorf("class(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// TestScrubberFindsRot flips a byte of a replica nobody reads; the scrubber
// finds it and reports it.
func TestScrubberFindsRot(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.grant(4, 1)
	if err := tc.write(4, 1, 0, bytes.Repeat([]byte("x"), 100000)); err != nil {
		t.Fatal(err)
	}
	tc.scrub = time.Second
	tc.servers[0].Close()
	tc.start(0)
	tc.master.wait(t, "register")
	flipByte(t, chunkFile(t, tc.dirs[0], 4), 70000)
	for tc.clock.Waiters() < 2 { // heartbeat and housekeeping tickers
		time.Sleep(time.Millisecond)
	}
	tc.clock.Advance(time.Second)
	tc.master.wait(t, "corrupt")
}

// TestHeartbeatTellsDeletions: a replica deleted (here at the master's
// word) is listed as deleted in the next heartbeat the master answers —
// kept through a refused one — and then no more.
func TestHeartbeatTellsDeletions(t *testing.T) {
	tc := newTestCluster(t, 1)
	for h := chunkfs.Handle(9); h <= 10; h++ {
		tc.grant(h, 1)
		if err := tc.write(h, 1, 0, []byte("hello")); err != nil {
			t.Fatal(err)
		}
	}
	tc.master.mu.Lock()
	tc.master.garbage = []uint64{9}
	tc.master.mu.Unlock()
	tc.clock.Advance(3 * time.Second)
	tc.master.wait(t, "heartbeat")
	if b := tc.master.lastBeat(); len(b.Deleted) != 0 {
		t.Fatalf("heartbeat before the deletion lists deleted %v", b.Deleted)
	}
	tc.master.mu.Lock()
	tc.master.failBeats = 1
	tc.master.mu.Unlock()
	tc.clock.Advance(3 * time.Second)
	tc.master.wait(t, "heartbeat refused")
	tc.clock.Advance(3 * time.Second)
	tc.master.wait(t, "heartbeat")
	if b := tc.master.lastBeat(); !slices.Equal(b.Deleted, []uint64{9}) {
		t.Fatalf("heartbeat after the deletion (and a refused one) lists deleted %v, want [9]", b.Deleted)
	}
	tc.clock.Advance(3 * time.Second)
	tc.master.wait(t, "heartbeat")
	if b := tc.master.lastBeat(); len(b.Deleted) != 0 {
		t.Fatalf("a deletion told once is told again: %v", b.Deleted)
	}
}

// TestScrubberGoesRoundOneChunkAnInterval rots every chunk and checks that
// the scrubber finds them one per interval, in turn, and lists them in
// heartbeats.
func TestScrubberGoesRoundOneChunkAnInterval(t *testing.T) {
	tc := newTestCluster(t, 1)
	for h := chunkfs.Handle(1); h <= 3; h++ {
		tc.grant(h, 1)
		if err := tc.write(h, 1, 0, bytes.Repeat([]byte{byte(h)}, 70000)); err != nil {
			t.Fatal(err)
		}
	}
	tc.scrub = 5 * time.Second
	tc.servers[0].Close()
	tc.start(0)
	tc.master.wait(t, "register")
	for h := chunkfs.Handle(1); h <= 3; h++ {
		flipByte(t, chunkFile(t, tc.dirs[0], h), 66000)
	}
	for tc.clock.Waiters() < 2 { // heartbeat and housekeeping tickers
		time.Sleep(time.Millisecond)
	}
	reported := func() int {
		tc.master.mu.Lock()
		defer tc.master.mu.Unlock()
		return len(tc.master.corrupt)
	}
	for want := 1; want <= 3; want++ {
		tc.clock.Advance(5 * time.Second)
		tc.master.wait(t, "corrupt")
		time.Sleep(50 * time.Millisecond) // a second report, if one were made, arrives
		if got := reported(); got != want {
			t.Fatalf("after %d intervals %d corrupt replicas reported", want, got)
		}
	}
	tc.master.mu.Lock()
	var seen []uint64
	for _, r := range tc.master.corrupt {
		seen = append(seen, r.Handle)
	}
	tc.master.mu.Unlock()
	if !slices.Equal(seen, []uint64{1, 2, 3}) {
		t.Fatalf("scrubbed in the order %v", seen)
	}
	b := tc.beatOf(0)
	slices.Sort(b.Corrupt)
	if !slices.Equal(b.Corrupt, []uint64{1, 2, 3}) {
		t.Fatalf("heartbeat lists corrupt %v", b.Corrupt)
	}
}

// TestDeletionsOverflowToARegistration: a master told of no deletion for
// so long that its list outgrew the bound is sent a full report instead
// (the heartbeat asks for a registration), and nothing is kept for it.
func TestDeletionsOverflowToARegistration(t *testing.T) {
	tc := newTestCluster(t, 1)
	s, m := tc.servers[0], tc.master.addr
	for h := range chunkfs.Handle(maxDeletedPending + 1) {
		s.reporter.noteDeleted(h + 1)
	}
	if hs, ok := s.reporter.takeDeleted(m); ok || len(hs) != 0 {
		t.Fatalf("after %d deletions: %d kept, complete %v; want none kept, incomplete", maxDeletedPending+1, len(hs), ok)
	}
	s.reporter.noteDeleted(7)
	s.reporter.requeueDeleted(m, make([]chunkfs.Handle, maxDeletedPending), true)
	if _, ok := s.reporter.takeDeleted(m); ok {
		t.Fatal("a requeue past the bound kept the list complete")
	}
	if hs, ok := s.reporter.takeDeleted(m); !ok || len(hs) != 0 {
		t.Fatalf("after a full report's worth: %v, %v", hs, ok)
	}
}
