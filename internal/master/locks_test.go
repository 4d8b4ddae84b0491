package master

import (
	"context"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/certs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

func (tm *testMaster) session(id uint64, reclaim bool) (uint64, error) {
	resp, err := tm.c.LockSession(bg, &pb.LockSessionRequest{Session: id, Reclaim: reclaim})
	if err != nil {
		return 0, err
	}
	return resp.Session, nil
}

func (tm *testMaster) lock(fi *pb.FileInfo, p string, session, owner uint64, typ uint32, reclaim bool) (*pb.LockResponse, error) {
	return tm.c.Lock(bg, &pb.LockRequest{Caller: root, Path: p, Inode: fi.Inode, Session: session, Reclaim: reclaim,
		Lock: &pb.FileLock{Kind: 1, Type: typ, Start: 0, End: ^uint64(0), Owner: owner}})
}

// TestLocksAcrossRestart: a new cluster grants locks at once; after a
// master restart the table is empty and in its grace period, sessions
// reclaim what they held, others wait, and a session that does not come
// back loses its locks when the grace period ends.
func TestLocksAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	tm := startMaster(t, dir, nil)
	fi := tm.create(root, "/f")
	a, err := tm.session(0, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := tm.session(0, false)
	if r, err := tm.lock(fi, "/f", a, 1, 2, false); err != nil || !r.Granted {
		t.Fatalf("first lock on a new cluster: %v %v", r, err)
	}
	if r, err := tm.lock(fi, "/f", b, 1, 1, false); err != nil || r.Granted || r.Conflict.GetSession() != a {
		t.Fatalf("conflicting lock: %v %v", r, err)
	}
	// Bad input changes nothing.
	for _, req := range []*pb.LockRequest{
		{Caller: root, Path: "/f", Inode: fi.Inode, Session: a},
		{Caller: root, Path: "/f", Inode: fi.Inode, Session: a, Lock: &pb.FileLock{Kind: 7, Type: 1}},
		{Caller: root, Path: "/f", Inode: fi.Inode, Session: a, Lock: &pb.FileLock{Kind: 1, Type: 1, Start: 9, End: 3}},
		{Caller: root, Path: "/f", Inode: fi.Inode + 1, Session: a, Lock: &pb.FileLock{Kind: 1, Type: 1}},
		{Caller: root, Path: "/", Inode: 1, Session: a, Lock: &pb.FileLock{Kind: 1, Type: 1}},
		{Caller: root, Path: "rel", Inode: fi.Inode, Session: a, Lock: &pb.FileLock{Kind: 1, Type: 1}},
		{Caller: root, Path: "/f", Inode: fi.Inode, Session: 12345, Lock: &pb.FileLock{Kind: 1, Type: 1}},
	} {
		if _, err := tm.c.Lock(bg, req); err == nil {
			t.Errorf("lock %v accepted", req)
		}
	}
	clk := tm.clock
	tm.close()
	tm = startMaster(t, dir, clk)
	if _, err := tm.session(a, false); kindOf(err) != chunkfs.KindNotExist {
		t.Fatalf("renewing after a restart without reclaim: %v", err)
	}
	if _, err := tm.session(a, true); err != nil {
		t.Fatalf("reclaiming the session: %v", err)
	}
	c, _ := tm.session(0, false)
	if _, err := tm.lock(fi, "/f", c, 1, 1, false); kindOf(err) != chunkfs.KindUnavailable {
		t.Errorf("a new lock in the grace period: %v", err)
	}
	if r, err := tm.lock(fi, "/f", a, 1, 2, true); err != nil || !r.Granted {
		t.Fatalf("reclaim: %v %v", r, err)
	}
	for range 3 { // past the grace period, both renewing
		clk.Advance(LockSessionTTL / 2)
		tm.session(a, false)
		tm.session(c, false)
	}
	if r, err := tm.lock(fi, "/f", c, 1, 1, false); err != nil || r.Granted {
		t.Fatalf("after the grace period, the reclaimed lock holds: %v %v", r, err)
	}
	if _, err := tm.session(b, true); kindOf(err) != chunkfs.KindNotExist {
		t.Errorf("a session reclaimed after the grace period: %v", err)
	}
	// a stops renewing: its session lapses and its lock goes.
	for range 3 {
		clk.Advance(LockSessionTTL / 2)
		tm.session(c, false)
	}
	if r, err := tm.lock(fi, "/f", c, 1, 2, false); err != nil || !r.Granted {
		t.Fatalf("a lapsed session's lock still holds: %v %v", r, err)
	}
}

// TestLockSessionsBoundToIdentity: a lock session belongs to the
// certificate identity that opened it. Another user, or a proxy mount,
// that names it cannot renew, close or use it — each is refused with
// permission denied — and its holder's locks stay.
func TestLockSessionsBoundToIdentity(t *testing.T) {
	s := openSecure(t)
	m := s.m
	rootCtx := s.as(t, rootID)
	aliceCtx := s.as(t, aliceID)
	bobCtx := s.as(t, certs.Identity{Role: certs.RoleClient, Name: "bob", UID: 1001, GIDs: []uint32{101}})
	proxyCtx := s.as(t, proxyID)
	r, err := call(rootCtx, m, "Create", m.Server().Create, &pb.CreateRequest{Path: "/f", Mode: 0o666})
	if err != nil {
		t.Fatal(err)
	}
	ino := r.Info.Inode
	session := func(ctx context.Context, req *pb.LockSessionRequest) (uint64, error) {
		resp, err := call(ctx, m, "LockSession", m.Server().LockSession, req)
		return resp.GetSession(), err
	}
	lock := func(ctx context.Context, sess uint64, typ uint32, test bool) (*pb.LockResponse, error) {
		return call(ctx, m, "Lock", m.Server().Lock, &pb.LockRequest{Path: "/f", Inode: ino, Session: sess, Test: test,
			Lock: &pb.FileLock{Kind: 1, Type: typ, Start: 0, End: ^uint64(0), Owner: 1}})
	}
	a, err := session(aliceCtx, &pb.LockSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := lock(aliceCtx, a, 2, false); err != nil || !r.Granted {
		t.Fatalf("alice's lock: %v %v", r, err)
	}
	for who, ctx := range map[string]context.Context{"bob": bobCtx, "a proxy mount": proxyCtx, "root": rootCtx} {
		for what, err := range map[string]error{
			"renew":   second(session(ctx, &pb.LockSessionRequest{Session: a})),
			"reclaim": second(session(ctx, &pb.LockSessionRequest{Session: a, Reclaim: true})),
			"close":   second(session(ctx, &pb.LockSessionRequest{Session: a, Close: true})),
			"unlock":  second(lock(ctx, a, lockUnlock, false)),
			"lock":    second(lock(ctx, a, 2, false)),
			"test":    second(lock(ctx, a, 2, true)),
		} {
			if kindOf(err) != chunkfs.KindPermission || !strings.Contains(err.Error(), "permission denied") {
				t.Errorf("%s using alice's session to %s: %v; want permission denied", who, what, err)
			}
		}
	}
	// Alice's lock stands: bob, in his own session, meets it.
	b, err := session(bobCtx, &pb.LockSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := lock(bobCtx, b, 2, false); err != nil || r.Granted || r.Conflict.GetSession() != a {
		t.Fatalf("bob's lock while alice holds hers: %v %v", r, err)
	}
	// Alice renews and closes her own session; then bob gets the lock.
	if _, err := session(aliceCtx, &pb.LockSessionRequest{Session: a}); err != nil {
		t.Errorf("alice renews: %v", err)
	}
	if _, err := session(aliceCtx, &pb.LockSessionRequest{Session: a, Close: true}); err != nil {
		t.Errorf("alice closes: %v", err)
	}
	if r, err := lock(bobCtx, b, 2, false); err != nil || !r.Granted {
		t.Errorf("bob's lock after alice closed her session: %v %v", r, err)
	}
}

func second[T any](_ T, err error) error { return err }
