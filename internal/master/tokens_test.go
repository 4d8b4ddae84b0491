package master

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/token"
)

// startTokenMaster starts a master with tokens on, keys of an hour,
// tokens of ten minutes, on a token clock of its own.
func startTokenMaster(t *testing.T, dir string, tclk *clock.Fake) *testMaster {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(t, dir, clk)
	cfg.MinReplicas = 1
	cfg.Tokens, cfg.TokenKeyPeriod, cfg.TokenLifetime, cfg.TokenClock = true, time.Hour, 10*time.Minute, tclk
	tm := startWith(t, cfg, clk)
	tm.waitKeys(tclk)
	return tm
}

// waitKeys waits for the key loop to have logged keys a period past now.
func (tm *testMaster) waitKeys(tclk *clock.Fake) {
	tm.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if end, _ := tm.m.state.keyHorizon(); end.After(tclk.Now().Add(tm.cfg.TokenKeyPeriod)) {
			return
		}
	}
	tm.t.Fatal("the leader did not log the next token key")
}

// chunkserverRing is the keyring a chunkserver builds from a master's
// answer: each key accepted until it expires.
func chunkserverRing(keys []*pb.TokenKey, now time.Time) *token.Keyring {
	r := token.NewKeyring(0)
	for _, k := range keys {
		key := token.Key{ID: k.Id, Until: time.UnixMilli(k.ExpiresUnixMs)}
		copy(key.Secret[:], k.Secret)
		r.Add(key, now)
	}
	return r
}

func TestLocationsCarryTokens(t *testing.T) {
	tclk := clock.NewFake(time.Unix(1_800_000_000, 0))
	tm := startTokenMaster(t, "", tclk)
	tm.startCS("cs0", "r0")
	tm.startCS("cs1", "r1")
	resp := tm.startCSResp("cs2", "r2")
	if len(resp.TokenKeys) != 2 {
		t.Fatalf("register answered %d token keys; want the signing one and the next", len(resp.TokenKeys))
	}
	ring := chunkserverRing(resp.TokenKeys, tclk.Now())
	tm.create(alice, "/f")
	pw := tm.prepare(alice, "/f", 0, false)
	wt, err := token.Decode(pw.Chunk.Token)
	if err != nil {
		t.Fatalf("prepare write token: %v", err)
	}
	if err := ring.Verify(wt, pw.Chunk.Handle, token.Read|token.Write, tclk.Now()); err != nil || wt.UID != alice.Uid {
		t.Fatalf("prepare write token %+v: %v", wt, err)
	}
	gc, err := tm.c.GetChunks(bg, &pb.GetChunksRequest{Caller: alice, Path: "/f"})
	if err != nil || len(gc.Chunks) != 1 {
		t.Fatalf("get chunks: %v %v", gc, err)
	}
	rt, err := token.Decode(gc.Chunks[0].Token)
	if err != nil {
		t.Fatal(err)
	}
	if err := ring.Verify(rt, pw.Chunk.Handle, token.Read, tclk.Now()); err != nil {
		t.Fatalf("read token: %v", err)
	}
	if err := ring.Verify(rt, pw.Chunk.Handle, token.Write, tclk.Now()); !errors.Is(err, token.ErrAccess) {
		t.Fatalf("a read token grants write: %v", err)
	}
	if err := ring.Verify(rt, pw.Chunk.Handle, token.Read, tclk.Now().Add(10*time.Minute)); !errors.Is(err, token.ErrExpired) {
		t.Fatalf("a token past its lifetime: %v", err)
	}
}

func TestTokenKeysRotate(t *testing.T) {
	tclk := clock.NewFake(time.Unix(1_800_000_000, 0))
	tm := startTokenMaster(t, "", tclk)
	f := tm.startCS("cs0", "r0")
	tm.create(alice, "/f")
	h := tm.prepare(alice, "/f", 0, false).Chunk.Handle
	var prev []byte
	for step := 0; step < 3*6; step++ { // three periods, ten minutes at a time
		tclk.Advance(10 * time.Minute)
		tm.waitKeys(tclk)
		keys := tm.beat(f).TokenKeys
		gc, err := tm.c.GetChunks(bg, &pb.GetChunksRequest{Caller: alice, Path: "/f"})
		if err != nil {
			t.Fatal(err)
		}
		ring := chunkserverRing(keys, tclk.Now())
		tok, _ := token.Decode(gc.Chunks[0].Token)
		if err := ring.Verify(tok, h, token.Read, tclk.Now()); err != nil {
			t.Fatalf("step %d: a fresh token with the keys of a heartbeat: %v", step, err)
		}
		if prev != nil {
			old, _ := token.Decode(prev)
			if err := ring.Verify(old, h, token.Read, tclk.Now()); err != nil && !errors.Is(err, token.ErrExpired) {
				t.Fatalf("step %d: the previous token (key %d) refused for %v, not its age", step, old.KeyID, err)
			}
		}
		prev = gc.Chunks[0].Token
		if len(keys) > 3 {
			t.Fatalf("step %d: %d keys handed out; want at most the previous, the current and the next", step, len(keys))
		}
	}
	if _, id := tm.m.state.keyHorizon(); id < 4 {
		t.Fatalf("after three periods the last key is %d", id)
	}
}

func TestTokenKeysSurviveRestart(t *testing.T) {
	tclk := clock.NewFake(time.Unix(1_800_000_000, 0))
	tm := startTokenMaster(t, "", tclk)
	f := tm.startCS("cs0", "r0")
	tm.create(alice, "/f")
	pw := tm.prepare(alice, "/f", 0, false)
	if err := tm.m.Snapshot(); err != nil {
		t.Fatal(err)
	}
	dir := tm.cfg.Dir
	tm.close()
	tm2 := startTokenMaster(t, dir, tclk)
	ring := chunkserverRing(tm2.register(f, "r0").TokenKeys, tclk.Now())
	tok, _ := token.Decode(pw.Chunk.Token)
	if err := ring.Verify(tok, pw.Chunk.Handle, token.Write, tclk.Now()); err != nil {
		t.Fatalf("a token signed before the restart: %v", err)
	}
}

func TestStateSnapshotKeepsKeys(t *testing.T) {
	s := newState(time.Minute)
	at := time.Unix(1_800_000_000, 0)
	for id := uint32(1); id <= 3; id++ {
		if r := s.Apply(uint64(id), encodeKeyCommand(token.Key{ID: id, Secret: [32]byte{byte(id)}, Until: at.Add(time.Duration(id) * time.Hour)}, at)); r != nil {
			t.Fatalf("apply key %d: %v", id, r)
		}
	}
	if r := s.Apply(4, encodeKeyCommand(token.Key{ID: 4}, at)[:10]); r == nil {
		t.Fatal("a truncated key command applied")
	}
	var b bytes.Buffer
	if err := s.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	back := newState(time.Minute)
	if err := back.Restore(4, bytes.NewReader(b.Bytes())); err != nil {
		t.Fatal(err)
	}
	if got, want := back.keys.Keys(), s.keys.Keys(); len(got) != 3 || got[2] != want[2] || back.keyID != 3 {
		t.Fatalf("restored keys %v (last ID %d); want %v", got, back.keyID, want)
	}
	// A checkpoint of a master that never made a key is the namespace's.
	var plain bytes.Buffer
	if err := newState(time.Minute).Snapshot(&plain); err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(plain.Bytes(), keySectionMagic) || back.Restore(5, bytes.NewReader(plain.Bytes())) != nil || len(back.keys.Keys()) != 0 {
		t.Fatal("a checkpoint without keys does not restore as before")
	}
	for n := range len(keySectionMagic) + 5 + keySize {
		if _, _, _, err := decodeKeySection(b.Bytes()[:len(keySectionMagic)+n]); err == nil && n > 0 && n < 5+3*keySize {
			t.Fatalf("a key section cut at %d bytes decoded", n)
		}
	}
}

func TestTokensOffByDefault(t *testing.T) {
	tm := startMasterMin1(t, "", nil)
	if resp := tm.startCSResp("cs0", "r0"); len(resp.TokenKeys) != 0 {
		t.Fatal("keys handed out with tokens off")
	}
	tm.create(alice, "/f")
	if pw := tm.prepare(alice, "/f", 0, false); len(pw.Chunk.Token) != 0 {
		t.Fatal("a token signed with tokens off")
	}
}

// TestEntryWithKeyCommand: a log entry holding a token key among
// namespace commands applies the key too (the log applies whole entries
// through ApplyEntry).
func TestEntryWithKeyCommand(t *testing.T) {
	s := newState(time.Minute)
	at := time.Unix(1_800_000_000, 0)
	init := (&namespace.Command{Op: namespace.OpInit, ChunkSize: 1 << 20, Replication: 3}).Encode(nil)
	key := encodeKeyCommand(token.Key{ID: 1, Secret: [32]byte{1}, Until: at.Add(time.Hour)}, at)
	res := s.ApplyEntry(1, [][]byte{init, key})
	if r, ok := res[0].(namespace.Result); !ok || r.Err != nil {
		t.Fatalf("namespace command: %v", res[0])
	}
	if res[1] != nil {
		t.Fatalf("key command: %v", res[1])
	}
	if keys := s.keys.Keys(); len(keys) != 1 || keys[0].ID != 1 {
		t.Fatalf("keys after the entry: %v", keys)
	}
}
