package chunkserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/chunkstore"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// newMemCluster starts n servers, each keeping its chunks in a MemFS of
// its own that the test can inject faults into.
func newMemCluster(t *testing.T, n int) (*testCluster, []*chunkstore.MemFS) {
	dirs := make([]string, n)
	fss := make(map[string]*chunkstore.MemFS)
	var list []*chunkstore.MemFS
	for i := range dirs {
		dirs[i] = t.TempDir() // keeps the server ID; chunks go to the MemFS
		fss[dirs[i]] = chunkstore.NewMemFS(1 << 30)
		list = append(list, fss[dirs[i]])
	}
	tc := newTunedCluster(t, dirs, func(c *Config) { c.FS = fss[c.Dirs[0]] })
	return tc, list
}

// beatOf returns the newest heartbeat of server i after the clock moves
// by one interval.
func (tc *testCluster) beatOf(i int) *pb.HeartbeatRequest {
	tc.t.Helper()
	tc.master.mu.Lock()
	before := len(tc.master.beats)
	tc.master.mu.Unlock()
	for range 50 {
		tc.clock.Advance(3 * time.Second)
		time.Sleep(20 * time.Millisecond) // let the heartbeats go out
		tc.master.mu.Lock()
		for j := len(tc.master.beats) - 1; j >= before; j-- {
			if b := tc.master.beats[j]; b.Addr == tc.addrs[i] {
				tc.master.mu.Unlock()
				return b
			}
		}
		tc.master.mu.Unlock()
	}
	tc.t.Fatalf("no heartbeat from server %d", i)
	return nil
}

// TestChunkInfoTellsNoSpace: a replica whose last mutation failed for
// want of space says so in ChunkInfo (the master's probe after the
// writer's failure takes it out of the lease); the others do not, and it
// stops saying so once a mutation succeeds there, or noSpaceFor later.
func TestChunkInfoTellsNoSpace(t *testing.T) {
	tc, fss := newMemCluster(t, 3)
	tc.grant(1, 1)
	if err := tc.write(1, 1, 0, []byte("fits")); err != nil {
		t.Fatal(err)
	}
	noSpace := func() []bool {
		var out []bool
		for i := range tc.servers {
			resp, err := tc.cs(i).ChunkInfo(context.Background(), &pb.ChunkInfoRequest{Handle: 1})
			if err != nil {
				t.Fatalf("chunk info from %d: %v", i, err)
			}
			out = append(out, resp.NoSpace)
		}
		return out
	}
	fss[2].SetFault(func(op, name string) error {
		if op == "write" && strings.HasSuffix(name, ".data") {
			return syscall.ENOSPC
		}
		return nil
	})
	if err := tc.write(1, 1, 4, []byte("does not")); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Fatalf("write with a secondary full: %v, want KindNoSpace", err)
	}
	if got := noSpace(); !slices.Equal(got, []bool{false, false, true}) {
		t.Fatalf("no space after the failed write: %v, want only the full secondary", got)
	}
	tc.clock.Advance(noSpaceFor)
	if got := noSpace(); slices.Contains(got, true) {
		t.Fatalf("no space %v after the failure: %v", noSpaceFor, got)
	}
	tc.grant(1, 2) // the lease ended meanwhile
	if err := tc.write(1, 2, 4, []byte("does not")); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Fatalf("write with a secondary full: %v, want KindNoSpace", err)
	}
	if got := noSpace(); !slices.Equal(got, []bool{false, false, true}) {
		t.Fatalf("no space after the second failed write: %v, want only the full secondary", got)
	}
	fss[2].SetFault(nil)
	if err := tc.write(1, 2, 4, []byte("room again")); err != nil {
		t.Fatal(err)
	}
	if got := noSpace(); slices.Contains(got, true) {
		t.Fatalf("no space after a write that succeeded everywhere: %v", got)
	}
}

func TestFullDiskReachesTheWriterAsNoSpace(t *testing.T) {
	tc, fss := newMemCluster(t, 3)
	tc.grant(1, 1)
	data := randBytes(rand.New(rand.NewPCG(2, 2)), 100000)
	if err := tc.write(1, 1, 0, data); err != nil {
		t.Fatal(err)
	}
	for _, full := range []int{2, 0} { // a secondary, then the primary
		before, _ := tc.servers[full].store.Info(1)
		fss[full].SetFault(func(op, name string) error {
			if op == "write" && strings.HasSuffix(name, ".data") {
				return syscall.ENOSPC
			}
			return nil
		})
		err := tc.write(1, 1, int64(len(data)), []byte("does not fit"))
		if chunkfs.KindOf(err) != chunkfs.KindNoSpace {
			t.Fatalf("write with server %d full: %v, want KindNoSpace", full, err)
		}
		fss[full].SetFault(nil)
		if in, err := tc.servers[full].store.Info(1); err != nil || in.Corrupt || in.Length != before.Length {
			t.Fatalf("full server's replica: %+v, %v", in, err)
		}
		if b := tc.beatOf(full); len(b.Corrupt) != 0 {
			t.Fatalf("full server reports corrupt replicas %v", b.Corrupt)
		}
	}
	// A record append, and a clone onto a full server, are refused alike.
	fss[1].SetFault(func(op, name string) error {
		if op == "write" && strings.Contains(name, ".data") {
			return syscall.ENOSPC
		}
		return nil
	})
	tc.grant(2, 1)
	if _, err := tc.appendRecord(2, 1, 64<<20, []byte("record")); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Fatalf("append with a secondary full: %v, want KindNoSpace", err)
	}
	tc.writeOn(0, 9, 1, []byte("to clone"))
	if _, err := tc.clone(1, 9, 1, 0, 8); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Fatalf("clone onto a full server: %v, want KindNoSpace", err)
	}
	if _, err := tc.servers[1].store.Info(9); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("failed clone kept: %v", err)
	}
	fss[1].SetFault(nil)
	// Once there is room again, writes go on and the replicas agree.
	more := []byte("fits now too") // as long as the refused write: it covers it
	if err := tc.write(1, 1, int64(len(data)), more); err != nil {
		t.Fatalf("write once there is room: %v", err)
	}
	if got := tc.sameReplicas(1, 1); !bytes.Equal(got, append(data, more...)) {
		t.Fatal("replicas hold the wrong bytes")
	}
}

func TestFailingDiskLosesReplicasNotTheServer(t *testing.T) {
	tc, fss := newMemCluster(t, 2)
	tc.grant(1, 1)
	tc.grant(2, 1)
	if err := tc.write(1, 1, 0, []byte("one")); err != nil {
		t.Fatal(err)
	}
	fss[1].SetFault(func(op, name string) error { return syscall.EIO })
	if err := tc.write(1, 1, 3, []byte("more")); err == nil {
		t.Fatal("write to a failing disk succeeded")
	}
	// Every replica of the failed directory is reported, in heartbeats,
	// until the master has them deleted; the server answers on.
	b := tc.beatOf(1)
	slices.Sort(b.Corrupt)
	if !slices.Equal(b.Corrupt, []uint64{1, 2}) {
		t.Fatalf("heartbeat lists corrupt %v, want [1 2]", b.Corrupt)
	}
	if len(b.Disks) != 0 || b.Capacity != 0 {
		t.Fatalf("failed directory still counted: %v, capacity %d", b.Disks, b.Capacity)
	}
	ctx := context.Background()
	if _, err := tc.cs(1).ChunkInfo(ctx, &pb.ChunkInfoRequest{Handle: 1}); chunkfs.KindOf(err) != chunkfs.KindChecksum {
		t.Fatalf("chunk info of a lost replica: %v", err)
	}
	if _, err := tc.cs(1).Lease(ctx, &pb.LeaseRequest{Handle: 3, Version: 1, Create: true}); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Fatalf("new chunk with no usable directory: %v, want KindNoSpace", err)
	}
	if got := tc.replica(0, 1, 1); string(got) != "onemore" { // applied where it could be
		t.Fatalf("the other server's replica: %q", got)
	}
}

// TestStreamIdleConnectionClosed: the server's data stream closes a
// connection that sends its magic and then nothing for StreamIdle (the
// socket's read deadline; the test's own 10 s only stops a hang).
func TestStreamIdleConnectionClosed(t *testing.T) {
	tc := newTunedCluster(t, []string{t.TempDir()}, func(c *Config) { c.StreamIdle = 100 * time.Millisecond })
	conn, err := net.Dial("tcp", tc.addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, rpc.StreamMagic)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle data connection: %v, want it closed by the server", err)
	}
}

// TestFullServerRefusesNewReplicas: below its reserve a server refuses to
// create a chunk or take a clone, with KindNoSpace, so the master places
// it elsewhere; the chunks it holds are written on.
func TestFullServerRefusesNewReplicas(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	small := chunkstore.NewMemFS(100 << 20)
	tc := newTunedCluster(t, dirs, func(c *Config) {
		if c.Dirs[0] == dirs[0] {
			c.FS = small
		}
	})
	tc.writeOn(0, 1, 1, make([]byte, 40<<20)) // 60 MiB free: under the 64 MiB reserve
	ctx := context.Background()
	if _, err := tc.cs(0).Lease(ctx, &pb.LeaseRequest{Handle: 2, Version: 1, Create: true}); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Fatalf("new chunk on a full server: %v, want KindNoSpace", err)
	}
	tc.writeOn(1, 3, 1, []byte("elsewhere"))
	if _, err := tc.clone(0, 3, 1, 1, 9); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Fatalf("clone onto a full server: %v, want KindNoSpace", err)
	}
	id := tc.newID()
	if err := tc.data.Push(ctx, tc.addrs[:1], id, []byte("more")); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.cs(0).Write(ctx, &pb.WriteRequest{Handle: 1, Version: 1, Offset: 40 << 20, DataId: uint64(id), Length: 4}); err != nil {
		t.Fatalf("write to a chunk held: %v", err)
	}
}
