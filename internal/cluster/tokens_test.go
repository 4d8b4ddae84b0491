package cluster

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/token"
)

// Token keys of the tests: a key signs for ten minutes of the token
// clock, a token lives five.
const (
	testKeyPeriod     = 10 * time.Minute
	testTokenLifetime = 5 * time.Minute
)

// startTokens starts a cluster that requires chunk access tokens, with
// keys and tokens on their own fake clock.
func startTokens(t *testing.T) (*Cluster, *client.Client, *clock.Fake, context.Context) {
	t.Helper()
	tclk := clock.NewFake(time.Unix(1_800_000_000, 0))
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Tokens, cfg.TokenClock = true, tclk
	cfg.Master = func(mc *master.Config) { mc.TokenKeyPeriod, mc.TokenLifetime = testKeyPeriod, testTokenLifetime }
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cl, err := newDefaultClient(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return c, cl, tclk, ctx
}

// chunkOf asks the master where chunk 0 of p lives, with its read token.
func chunkOf(t *testing.T, ctx context.Context, c *Cluster, p string) *pb.ChunkLocation {
	t.Helper()
	cc, err := rpc.Dial(c.MasterAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := pb.NewMasterClient(cc).GetChunks(ctx, &pb.GetChunksRequest{Caller: &pb.Caller{Uid: 0, Gids: []uint32{0}}, Path: p, Count: 1})
	if err != nil || len(resp.Chunks) != 1 {
		t.Fatalf("get chunks of %s: %v, %v", p, resp, err)
	}
	return resp.Chunks[0]
}

// TestDirectStreamReadsNeedAToken: a data-stream read of a known handle
// straight to a chunkserver, without a token, with a forged one, an
// expired one or one for another chunk, returns nothing; nor does a read
// token let anyone push or write.
func TestDirectStreamReadsNeedAToken(t *testing.T) {
	c, cl, tclk, ctx := startTokens(t)
	secret := bytes.Repeat([]byte("the secret "), 20000)
	put(t, ctx, cl, "/secret", secret)
	put(t, ctx, cl, "/other", []byte("another file"))
	loc := chunkOf(t, ctx, c, "/secret")
	dc := rpc.NewDataClient()
	defer dc.Close()
	read := func(tok []byte) (int, []byte, error) {
		p := make([]byte, len(secret))
		n, err := dc.ReadToken(ctx, loc.Replicas[0], chunkfs.Handle(loc.Handle), chunkfs.Version(loc.Version), 0, p, tok)
		return n, p, err
	}
	if n, p, err := read(loc.Token); err != nil || n != len(secret) || !bytes.Equal(p, secret) {
		t.Fatalf("read with the master's token: %d bytes, %v", n, err)
	}
	forged := bytes.Clone(loc.Token)
	forged[10] ^= 1 // the handle, under the MAC
	expired := bytes.Clone(loc.Token)
	tclk.Advance(testTokenLifetime)
	other := chunkOf(t, ctx, c, "/other")
	for _, bad := range []struct {
		name string
		tok  []byte
		kind chunkfs.Kind
	}{
		{"no token", nil, chunkfs.KindPermission},
		{"a forged token", forged, chunkfs.KindPermission},
		{"an expired token", expired, chunkfs.KindStale},
		{"a token for another chunk", other.Token, chunkfs.KindPermission},
	} {
		n, p, err := read(bad.tok)
		if n != 0 || chunkfs.KindOf(err) != bad.kind || bytes.Contains(p, secret[:32]) {
			t.Fatalf("read with %s: %d bytes, %v; want nothing and %v", bad.name, n, err, bad.kind)
		}
		t.Logf("read with %s: %v", bad.name, err)
	}
	// A read token neither pushes nor writes.
	fresh := chunkOf(t, ctx, c, "/secret")
	if err := dc.PushToken(ctx, fresh.Replicas, 77, []byte("overwrite"), fresh.Token); chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Fatalf("push with a read token: %v", err)
	}
	pool := rpc.NewPool()
	defer pool.Close()
	cs, err := pool.ChunkServer(fresh.Replicas[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Write(ctx, &pb.WriteRequest{Handle: fresh.Handle, Version: fresh.Version, DataId: 77, Length: 9, Token: fresh.Token}); chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Fatalf("write with a read token: %v", err)
	}
	if got, err := get(ctx, cl, "/secret"); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("the file after the refused requests: %d bytes, %v", len(got), err)
	}
}

// TestCachedTokenExpiredIsRefreshed: a client whose cached location's
// token has expired reads on: the chunkserver says so, and the client
// looks the chunk up again.
func TestCachedTokenExpiredIsRefreshed(t *testing.T) {
	c, cl, tclk, ctx := startTokens(t)
	data := bytes.Repeat([]byte("cached "), 50000)
	put(t, ctx, cl, "/f", data)
	f, err := cl.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, 1000)
	if _, err := f.ReadAt(p, 0); err != nil {
		t.Fatal(err)
	}
	old := chunkOf(t, ctx, c, "/f").Token
	tclk.Advance(testTokenLifetime + time.Minute) // past the tokens, within the key's life
	if _, err := f.ReadAt(p, 1000); err != nil || !bytes.Equal(p, data[1000:2000]) {
		t.Fatalf("read after the cached token expired: %v", err)
	}
	tok, _ := token.Decode(old)
	if !tclk.Now().After(tok.Expiry) {
		t.Fatal("the cached token had not expired")
	}
	if err := putFile(ctx, cl, "/f", []byte("rewritten")); err != nil {
		t.Fatalf("write after the tokens expired: %v", err)
	}
}

// TestKeyRotationUnderLoad: writers, and readers holding their files
// open, run while the token clock passes four key periods, two minutes at
// a time (less than a token's lifetime); the clock moves on only once every writer and reader has
// finished an operation since it last moved, so each key and each token
// lifetime is crossed by all of them. Nothing fails, nothing is lost.
func TestKeyRotationUnderLoad(t *testing.T) {
	c, cl, tclk, ctx := startTokens(t)
	put(t, ctx, cl, "/probe", []byte("probe"))
	first, _ := token.Decode(chunkOf(t, ctx, c, "/probe").Token)
	const writers, readers = 3, 2
	kept := make([][]byte, readers)
	for r := range kept {
		kept[r] = bytes.Repeat([]byte(fmt.Sprintf("kept %d ", r)), 40000)
		put(t, ctx, cl, fmt.Sprintf("/kept%d", r), kept[r])
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var rounds atomic.Int64
	progress := make([]atomic.Int64, writers+readers) // operations done by each
	errs := make(chan error, writers+readers)
	written := make([]map[string][]byte, writers)
	for w := range written {
		written[w] = map[string][]byte{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := fmt.Sprintf("/w%d-%d", w, i%4)
				data := bytes.Repeat([]byte(fmt.Sprintf("%d.%d ", w, i)), 3000+i)
				if err := putFile(ctx, cl, p, data); err != nil {
					errs <- fmt.Errorf("write %s: %w", p, err)
					return
				}
				written[w][p] = data
				rounds.Add(1)
				got, err := get(ctx, cl, p)
				if err != nil || !bytes.Equal(got, data) {
					errs <- fmt.Errorf("read %s back: %d bytes, %v", p, len(got), err)
					return
				}
				progress[w].Add(1)
			}
		}()
	}
	for r := range readers {
		f, err := cl.Open(ctx, fmt.Sprintf("/kept%d", r))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		wg.Add(1)
		go func() { // one open file, its locations and tokens cached
			defer wg.Done()
			p := make([]byte, 4096)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				off := int64(i*4096) % int64(len(kept[r])-len(p))
				if _, err := f.ReadAt(p, off); err != nil || !bytes.Equal(p, kept[r][off:off+int64(len(p))]) {
					errs <- fmt.Errorf("read of open file /kept%d at %d: %v", r, off, err)
					return
				}
				progress[writers+r].Add(1)
			}
		}()
	}
	// Each step of the token clock waits for an operation of every
	// writer and reader begun after the last; a failed one ends the test.
	waitAll := func() bool {
		var at [writers + readers]int64
		for i := range at {
			at[i] = progress[i].Load()
		}
		deadline := time.Now().Add(time.Minute)
		for i := range at {
			for progress[i].Load() < at[i]+2 {
				select {
				case err := <-errs:
					errs <- err
					return false
				case <-ctx.Done():
					return false
				case <-time.After(time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Errorf("worker %d made no progress for a minute", i)
					return false
				}
			}
		}
		return true
	}
	const step = 2 * time.Minute
	for range 4 * int(testKeyPeriod/step) {
		if !waitAll() {
			break
		}
		tclk.Advance(step)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	files := 0
	for _, m := range written {
		for p, data := range m {
			if got, err := get(ctx, cl, p); err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s after the rotations: %d bytes, %v", p, len(got), err)
			}
			files++
		}
	}
	if files == 0 {
		t.Fatal("nothing was written")
	}
	last, _ := token.Decode(chunkOf(t, ctx, c, "/probe").Token)
	if last.KeyID < first.KeyID+3 {
		t.Fatalf("tokens signed with key %d, then %d: the keys did not rotate", first.KeyID, last.KeyID)
	}
	t.Logf("%d writes read back (%d files), open files read %d and %d times, while tokens went from key %d to key %d",
		rounds.Load(), files, progress[writers].Load(), progress[writers+1].Load(), first.KeyID, last.KeyID)
}

// putFile writes data as the whole of p.
func putFile(ctx context.Context, cl *client.Client, p string, data []byte) error {
	f, err := cl.Create(ctx, p)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestEveryMasterSignsTokens: in a group, every master, the observer
// too, signs with the keys in the log, and chunkservers accept the tokens
// of each, before and after the leader changes.
func TestEveryMasterSignsTokens(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Masters, cfg.Observers = 3, 1
	cfg.Tokens = true
	cfg.Master = func(mc *master.Config) { mc.Placement.MinFree = 0 }
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	cl, err := newDefaultClient(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	data := bytes.Repeat([]byte("group "), 10000)
	put(t, ctx, cl, "/f", data)
	// Masters other than the leader learn a new chunk's replicas when its
	// chunkservers register again, once they have applied the chunk.
	for i := range c.Masters() {
		for {
			st, err := cl.HAStatusOf(ctx, c.GroupMasterAddr(i))
			if err == nil && st.Applied >= uint64(cl.StateID()) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("master %d does not catch up: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i := range c.Chunkservers() {
		if err := c.RestartChunkserver(i); err != nil {
			t.Fatal(err)
		}
	}
	dc := rpc.NewDataClient()
	defer dc.Close()
	readVia := func(i int) {
		t.Helper()
		cc, err := rpc.Dial(c.GroupMasterAddr(i))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		var loc *pb.ChunkLocation
		for loc == nil { // an observer answers once it has the chunk's locations
			resp, err := pb.NewMasterClient(cc).GetChunks(ctx, &pb.GetChunksRequest{Caller: &pb.Caller{Gids: []uint32{0}}, Path: "/f", Count: 1, MinStateId: uint64(cl.StateID())})
			switch {
			case err == nil && len(resp.Chunks) == 1:
				loc = resp.Chunks[0]
			case ctx.Err() != nil:
				t.Fatalf("master %d: %v", i, err)
			default:
				time.Sleep(20 * time.Millisecond)
			}
		}
		for _, r := range loc.Replicas {
			p := make([]byte, len(data))
			var n int
			for { // a chunkserver learns a key new to it with its next heartbeat
				n, err = dc.ReadToken(ctx, r, chunkfs.Handle(loc.Handle), chunkfs.Version(loc.Version), 0, p, loc.Token)
				if chunkfs.KindOf(err) != chunkfs.KindStale || ctx.Err() != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil || !bytes.Equal(p[:n], data) {
				t.Fatalf("read from %s with master %d's token: %d bytes, %v", r, i, n, err)
			}
		}
	}
	for i := range c.Masters() {
		readVia(i)
	}
	old := c.Leader()
	if err := c.StopGroupMaster(old); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := get(ctx, cl, "/f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after the failover: %d bytes, %v", len(got), err)
	}
	for i := range c.Masters() {
		if i != old {
			readVia(i)
		}
	}
}

// TestTLSClusterRequiresTokens: a secure cluster checks tokens without
// being told to. A client's certificate reads nothing of a chunk without a
// token and may not make the calls only nodes make; the master's tokens
// and the nodes' own traffic (forwarding, clones) pass.
func TestTLSClusterRequiresTokens(t *testing.T) {
	c, cl, ctx := startTLS(t, nil)
	data := bytes.Repeat([]byte("tls secret "), 10000)
	put(t, ctx, cl, "/s", data)
	cc, err := c.Security().Dial(c.MasterAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := pb.NewMasterClient(cc).GetChunks(ctx, &pb.GetChunksRequest{Caller: &pb.Caller{Gids: []uint32{0}}, Path: "/s", Count: 1})
	if err != nil || len(resp.Chunks) != 1 || len(resp.Chunks[0].Token) == 0 {
		t.Fatalf("get chunks on a TLS cluster: %v, %v; want a location with a token", resp, err)
	}
	loc := resp.Chunks[0]
	dc := c.Security().NewDataClient()
	defer dc.Close()
	p := make([]byte, len(data))
	if n, err := dc.ReadToken(ctx, loc.Replicas[0], chunkfs.Handle(loc.Handle), chunkfs.Version(loc.Version), 0, p, nil); n != 0 || chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Fatalf("read over TLS with a client certificate and no token: %d bytes, %v", n, err)
	}
	if n, err := dc.ReadToken(ctx, loc.Replicas[0], chunkfs.Handle(loc.Handle), chunkfs.Version(loc.Version), 0, p, loc.Token); err != nil || !bytes.Equal(p[:n], data) {
		t.Fatalf("read over TLS with the master's token: %d bytes, %v", n, err)
	}
	pool := c.Security().NewPool()
	defer pool.Close()
	cs, err := pool.ChunkServer(loc.Replicas[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.DeleteChunks(ctx, &pb.DeleteChunksRequest{Handles: []uint64{loc.Handle}}); chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Fatalf("a client's DeleteChunks: %v; want permission denied", err)
	}
	if _, err := cs.Lease(ctx, &pb.LeaseRequest{Handle: loc.Handle, Version: loc.Version + 1, LeaseMs: 1000}); chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Fatalf("a client's Lease: %v; want permission denied", err)
	}
	if got, err := get(ctx, cl, "/s"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the file after the refused calls: %d bytes, %v", len(got), err)
	}
}
