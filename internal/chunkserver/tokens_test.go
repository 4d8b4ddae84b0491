package chunkserver

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/token"
)

// tokenCluster is a test cluster that requires tokens, its servers given
// the keys of signer, which plays the master.
type tokenCluster struct {
	*testCluster
	signer *token.Keyring
}

func newTokenCluster(t *testing.T, n int) *tokenCluster {
	t.Helper()
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	tc := &tokenCluster{testCluster: newTunedCluster(t, dirs, func(c *Config) { c.RequireTokens = true })}
	tc.signer = token.NewKeyring(10 * time.Minute)
	tc.addKey(1)
	return tc
}

// TestKeyAskGapOnTheServersClock: the least time between two asks for
// keys is measured on the server's clock: once it has passed, a token of
// a key not held asks the masters again, however little real time went
// by (TestNewKeyFetchedAtOnce advances that clock to ask anew).
func TestKeyAskGapOnTheServersClock(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	s := &Server{cfg: Config{Clock: clk}, keys: newTokenKeys(), ctx: context.Background()}
	s.awaitKey(2)
	s.awaitKey(3)
	if s.keys.asks != 1 {
		t.Fatalf("%d asks within keyAskGap, want 1", s.keys.asks)
	}
	clk.Advance(keyAskGap)
	s.awaitKey(4)
	if s.keys.asks != 2 {
		t.Fatalf("%d asks after keyAskGap, want 2", s.keys.asks)
	}
}

// longKeyWait replaces keyWait in tests that tell a refusal on the
// master's answer from one at the bound: a load that slows the answer by
// seconds does not reach it.
const longKeyWait = time.Minute

// lengthenKeyWait makes every server wait longKeyWait for keys.
func (tc *tokenCluster) lengthenKeyWait() {
	for _, s := range tc.servers {
		s.keys.setWait(longKeyWait)
	}
}

// addKey makes key id the signer's and hands it to every server, as a
// heartbeat answer would.
func (tc *tokenCluster) addKey(id uint32) {
	k := token.Key{ID: id, Secret: [32]byte{byte(id), 7}, Until: tc.clock.Now().Add(time.Hour)}
	tc.signer.Add(k, tc.clock.Now())
	pk := &pb.TokenKey{Id: id, Secret: k.Secret[:], ExpiresUnixMs: k.Until.Add(tc.signer.TTL()).UnixMilli()}
	for _, s := range tc.servers {
		s.learnKeys("", 0, keysFrom([]*pb.TokenKey{pk}))
	}
}

func (tc *tokenCluster) token(h chunkfs.Handle, a token.Access, at time.Time) []byte {
	tc.t.Helper()
	t, err := tc.signer.Sign(uint64(h), a, 1000, at)
	if err != nil {
		tc.t.Fatal(err)
	}
	return t.Encode()
}

// writeWith pushes data with push's token and writes it with write's.
func (tc *tokenCluster) writeWith(h chunkfs.Handle, off int64, data, push, write []byte) error {
	id := tc.newID()
	if err := tc.data.PushToken(context.Background(), tc.addrs, id, data, push); err != nil {
		return err
	}
	_, err := tc.cs(0).Write(context.Background(), &pb.WriteRequest{Handle: uint64(h), Version: 1, Offset: off, DataId: uint64(id),
		Length: int64(len(data)), Secondaries: tc.addrs[1:], Token: write})
	return err
}

// badTokens are the tokens a direct request for chunk h is refused with,
// and the kind of each refusal.
func (tc *tokenCluster) badTokens(h chunkfs.Handle, a token.Access) map[string]struct {
	tok  []byte
	kind chunkfs.Kind
} {
	now := tc.clock.Now()
	forged := tc.token(h, a, now)
	forged[len(forged)-1] ^= 1
	other := token.NewKeyring(time.Hour)
	other.Add(token.Key{ID: 9, Until: now.Add(time.Hour)}, now)
	unknown, _ := other.Sign(uint64(h), a, 1000, now)
	return map[string]struct {
		tok  []byte
		kind chunkfs.Kind
	}{
		"no token":                  {nil, chunkfs.KindPermission},
		"a forged token":            {forged, chunkfs.KindPermission},
		"an expired token":          {tc.token(h, a, now.Add(-10*time.Minute)), chunkfs.KindStale},
		"a token for another chunk": {tc.token(h+1, a|token.Write, now), chunkfs.KindPermission},
		"an unknown key's token":    {unknown.Encode(), chunkfs.KindStale},
		"garbage":                   {[]byte("not a token"), chunkfs.KindPermission},
	}
}

func TestChunkserverRefusesReadsWithoutAValidToken(t *testing.T) {
	tc := newTokenCluster(t, 3)
	const h = chunkfs.Handle(5)
	tc.grant(h, 1)
	data := bytes.Repeat([]byte("secret data "), 10000)
	rw := tc.token(h, token.Read|token.Write, tc.clock.Now())
	if err := tc.writeWith(h, 0, data, rw, rw); err != nil {
		t.Fatalf("write with a valid token: %v", err)
	}
	for name, bad := range tc.badTokens(h, token.Read) {
		for i := range tc.addrs {
			p := make([]byte, len(data))
			n, err := tc.data.ReadToken(context.Background(), tc.addrs[i], h, 1, 0, p, bad.tok)
			if n != 0 || chunkfs.KindOf(err) != bad.kind || bytes.Contains(p, data[:64]) {
				t.Fatalf("read of replica %d with %s: %d bytes, %v; want nothing, %v", i, name, n, err, bad.kind)
			}
			if _, err := tc.cs(i).ChunkInfo(context.Background(), &pb.ChunkInfoRequest{Handle: uint64(h), Token: bad.tok}); chunkfs.KindOf(err) != bad.kind {
				t.Fatalf("chunk info on %d with %s: %v", i, name, err)
			}
		}
	}
	p := make([]byte, len(data))
	rt := tc.token(h, token.Read, tc.clock.Now())
	if n, err := tc.data.ReadToken(context.Background(), tc.addrs[2], h, 1, 0, p, rt); err != nil || n != len(data) || !bytes.Equal(p, data) {
		t.Fatalf("read with a read token: %d, %v", n, err)
	}
	if _, err := tc.cs(1).ChunkInfo(context.Background(), &pb.ChunkInfoRequest{Handle: uint64(h), Token: rt}); err != nil {
		t.Fatalf("chunk info with a read token: %v", err)
	}
}

func TestChunkserverRefusesMutationsWithoutAWriteToken(t *testing.T) {
	tc := newTokenCluster(t, 2)
	const h = chunkfs.Handle(5)
	tc.grant(h, 1)
	now := tc.clock.Now()
	rw, ro := tc.token(h, token.Read|token.Write, now), tc.token(h, token.Read, now)
	if err := tc.data.PushToken(context.Background(), tc.addrs, tc.newID(), []byte("x"), ro); chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Fatalf("push with a read token: %v", err)
	}
	if err := tc.writeWith(h, 0, []byte("pushed"), rw, ro); chunkfs.KindOf(err) != chunkfs.KindPermission {
		t.Fatalf("write with a read token: %v", err)
	}
	for name, bad := range tc.badTokens(h, token.Write) {
		if err := tc.data.PushToken(context.Background(), tc.addrs, tc.newID(), []byte("x"), bad.tok); name != "a token for another chunk" && chunkfs.KindOf(err) != bad.kind {
			t.Fatalf("push with %s: %v", name, err)
		}
		if err := tc.writeWith(h, 0, []byte("y"), rw, bad.tok); chunkfs.KindOf(err) != bad.kind {
			t.Fatalf("write with %s: %v", name, err)
		}
		id := tc.newID()
		tc.data.PushToken(context.Background(), tc.addrs, id, []byte("z"), rw)
		_, err := tc.cs(0).Append(context.Background(), &pb.AppendRequest{Handle: uint64(h), Version: 1, DataId: uint64(id), Length: 1, Secondaries: tc.addrs[1:], ChunkSize: 1 << 20, Token: bad.tok})
		if chunkfs.KindOf(err) != bad.kind {
			t.Fatalf("append with %s: %v", name, err)
		}
		_, err = tc.cs(0).Reserve(context.Background(), &pb.ReserveRequest{Handle: uint64(h), Version: 1, DataId: 99, Length: 1, ChunkSize: 1 << 20, Token: bad.tok})
		if chunkfs.KindOf(err) != bad.kind {
			t.Fatalf("reserve with %s: %v", name, err)
		}
		if _, err := tc.cs(0).Sync(context.Background(), &pb.SyncRequest{Handle: uint64(h), Version: 1, Secondaries: tc.addrs[1:], Token: bad.tok}); chunkfs.KindOf(err) != bad.kind {
			t.Fatalf("sync with %s: %v", name, err)
		}
	}
	if got := tc.replicaWith(1, h, rw); len(got) != 0 {
		t.Fatalf("refused mutations left %q on a replica", got)
	}
	if err := tc.writeWith(h, 0, []byte("allowed"), rw, rw); err != nil {
		t.Fatalf("write with a write token: %v", err)
	}
	if _, err := tc.cs(0).Sync(context.Background(), &pb.SyncRequest{Handle: uint64(h), Version: 1, Secondaries: tc.addrs[1:], Token: rw}); err != nil {
		t.Fatalf("sync (forwarded with the client's token): %v", err)
	}
	if got := tc.replicaWith(1, h, rw); string(got) != "allowed" {
		t.Fatalf("secondary holds %q", got)
	}
}

// replicaWith reads the whole of chunk h from server i with tok.
func (tc *tokenCluster) replicaWith(i int, h chunkfs.Handle, tok []byte) []byte {
	tc.t.Helper()
	info, err := tc.cs(i).ChunkInfo(context.Background(), &pb.ChunkInfoRequest{Handle: uint64(h), Token: tok})
	if err != nil {
		tc.t.Fatalf("chunk info on %d: %v", i, err)
	}
	p := make([]byte, info.Length)
	if n, err := tc.data.ReadToken(context.Background(), tc.addrs[i], h, 1, 0, p, tok); err != nil || n != len(p) {
		tc.t.Fatalf("read replica %d: %d of %d bytes, %v", i, n, len(p), err)
	}
	return p
}

// TestCloneCarriesItsOwnToken: on plain TCP a clone's reads carry a token
// the target signs with the keys it holds.
func TestCloneCarriesItsOwnToken(t *testing.T) {
	tc := newTokenCluster(t, 2)
	const h = chunkfs.Handle(8)
	if _, err := tc.cs(0).Lease(context.Background(), &pb.LeaseRequest{Handle: uint64(h), Version: 1, Create: true, LeaseMs: 60000}); err != nil {
		t.Fatal(err)
	}
	rw := tc.token(h, token.Read|token.Write, tc.clock.Now())
	id := tc.newID()
	data := bytes.Repeat([]byte("c"), 300000)
	if err := tc.data.PushToken(context.Background(), tc.addrs[:1], id, data, rw); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.cs(0).Write(context.Background(), &pb.WriteRequest{Handle: uint64(h), Version: 1, DataId: uint64(id), Length: int64(len(data)), Token: rw}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.cs(1).Clone(context.Background(), &pb.CloneRequest{Handle: uint64(h), Version: 1, Source: tc.addrs[0], Length: int64(len(data))}); err != nil {
		t.Fatalf("clone: %v", err)
	}
	if got := tc.replicaWith(1, h, rw); !bytes.Equal(got, data) {
		t.Fatal("clone differs")
	}
}

func TestKeysLearntExpire(t *testing.T) {
	k := newTokenKeys()
	now := time.Unix(1e9, 0)
	k.learn("m", 0, keysFrom([]*pb.TokenKey{{Id: 1, Secret: make([]byte, 32), ExpiresUnixMs: now.Add(time.Minute).UnixMilli()},
		{Id: 2, Secret: make([]byte, 31), ExpiresUnixMs: now.Add(time.Hour).UnixMilli()},
		{Id: 3, Secret: make([]byte, 32), ExpiresUnixMs: now.UnixMilli()}}), now)
	if keys := k.ring.Keys(); len(keys) != 1 || keys[0].ID != 1 {
		t.Fatalf("held %v; want key 1 alone (2 has a short secret, 3 has expired)", keys)
	}
	k.learn("m", 0, keysFrom([]*pb.TokenKey{{Id: 4, Secret: make([]byte, 32), ExpiresUnixMs: now.Add(2 * time.Hour).UnixMilli()}}), now.Add(time.Minute))
	if keys := k.ring.Keys(); len(keys) != 1 || keys[0].ID != 4 {
		t.Fatalf("held %v; want key 1 dropped once expired", keys)
	}
}

// TestNewKeyFetchedAtOnce: requests with a token of a key the master
// logged after the server's last heartbeat (a cluster just started),
// several at once, are served, the server asking the master for its keys
// at once instead of refusing them until its next heartbeat; a token of a made-up newer key is
// refused as soon as the master has answered, and asks within keyAskGap
// of each other cost the master one heartbeat.
func TestNewKeyFetchedAtOnce(t *testing.T) {
	tc := newTokenCluster(t, 1)
	tc.lengthenKeyWait()
	const h = chunkfs.Handle(5)
	tc.grant(h, 1)
	data := bytes.Repeat([]byte("fresh key "), 5000)
	if err := tc.writeWith(h, 0, data, tc.token(h, token.Read|token.Write, tc.clock.Now()), tc.token(h, token.Write, tc.clock.Now())); err != nil {
		t.Fatal(err)
	}
	// Key 2 is the master's, not yet the server's; the fake clock stands
	// still, so no heartbeat is due.
	k := token.Key{ID: 2, Secret: [32]byte{2, 7}, Until: tc.clock.Now().Add(time.Hour)}
	tc.signer.Add(k, tc.clock.Now())
	tc.master.mu.Lock()
	tc.master.keys = []*pb.TokenKey{{Id: 2, Secret: k.Secret[:], ExpiresUnixMs: k.Until.Add(tc.signer.TTL()).UnixMilli()}}
	beats := len(tc.master.beats)
	tc.master.mu.Unlock()
	// An ask the setup made (a write that arrived before the server's
	// registration had its first key) is more than keyAskGap ago.
	tc.clock.Advance(keyAskGap)
	// Four requests at once: one asks, all wait for its answer.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, len(data))
			if n, err := tc.data.ReadToken(context.Background(), tc.addrs[0], h, 1, 0, p, tc.token(h, token.Read, tc.clock.Now())); err != nil || n != len(data) || !bytes.Equal(p, data) {
				t.Errorf("read %d with a token of a key logged since the last heartbeat: %d bytes, %v", i, n, err)
			}
		}()
	}
	wg.Wait()
	p := make([]byte, len(data))
	tc.master.mu.Lock()
	asked := len(tc.master.beats) - beats
	tc.master.mu.Unlock()
	if asked < 1 {
		t.Fatal("the server did not ask the master for its keys")
	}
	// A made-up key: refused once the master answered without it (well
	// within keyWait), then at once, without asking again.
	other := token.NewKeyring(time.Hour)
	other.Add(token.Key{ID: 40, Until: tc.clock.Now().Add(time.Hour)}, tc.clock.Now())
	bad, _ := other.Sign(uint64(h), token.Read, 1000, tc.clock.Now())
	tc.master.mu.Lock()
	beats = len(tc.master.beats)
	tc.master.mu.Unlock()
	for i := range 5 {
		start := time.Now()
		n, err := tc.data.ReadToken(context.Background(), tc.addrs[0], h, 1, 0, p, bad.Encode())
		if n != 0 || chunkfs.KindOf(err) != chunkfs.KindStale {
			t.Fatalf("read %d with a made-up key's token: %d bytes, %v", i, n, err)
		}
		if d := time.Since(start); d >= longKeyWait {
			t.Fatalf("read %d with a made-up key's token took %v: it waited for keyWait, not for the master's answer", i, d)
		}
	}
	tc.master.mu.Lock()
	asked = len(tc.master.beats) - beats
	tc.master.mu.Unlock()
	if asked > 2 {
		t.Fatalf("five reads with a made-up key cost the master %d heartbeats; want one per keyAskGap", asked)
	}
}

// TestNewKeyAskedOfAFailingMaster: a request with a token of a key not
// held, while the master refuses heartbeats, is refused as stale (the
// client asks the master again) as soon as the master's heartbeat fails,
// not after keyWait.
func TestNewKeyAskedOfAFailingMaster(t *testing.T) {
	tc := newTokenCluster(t, 1)
	tc.lengthenKeyWait()
	const h = chunkfs.Handle(5)
	tc.grant(h, 1)
	k := token.Key{ID: 2, Secret: [32]byte{2, 7}, Until: tc.clock.Now().Add(time.Hour)}
	tc.signer.Add(k, tc.clock.Now())
	tc.master.mu.Lock()
	tc.master.failBeats = 100
	tc.master.mu.Unlock()
	// An ask the setup made (a request that arrived before the server's
	// registration had its first key) is more than keyAskGap ago on the
	// server's clock (CI: without this the read's ask folded into it).
	tc.clock.Advance(keyAskGap)
	start := time.Now()
	p := make([]byte, 10)
	n, err := tc.data.ReadToken(context.Background(), tc.addrs[0], h, 1, 0, p, tc.token(h, token.Read, tc.clock.Now()))
	if n != 0 || chunkfs.KindOf(err) != chunkfs.KindStale {
		t.Fatalf("read with a key the failing master did not hand out: %d bytes, %v; want KindStale", n, err)
	}
	if d := time.Since(start); d >= longKeyWait {
		t.Fatalf("refused after %v: it waited for keyWait, not for the failed heartbeat", d)
	}
	tc.master.wait(t, "heartbeat refused")
}
