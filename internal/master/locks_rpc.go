package master

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/locks"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// LockSessionTTL is how long a lock session lives after its last renewal;
// mounts renew every third of it. It is also the grace period of a new
// leader's lock table, in which mounts reclaim the locks they held.
const LockSessionTTL = 30 * time.Second

// fileLocks is the leader's lock table (internal/locks): in memory only,
// started afresh, in its grace period, whenever this master becomes ready
// to lead.
type fileLocks struct {
	mu         sync.Mutex
	table      *locks.Table // nil until this master leads
	lastExpire time.Time
}

// reset starts an empty table at now, in its grace period unless the
// cluster is new. Sessions get random IDs (openRandom), so new sessions
// do not run into the IDs an earlier leader gave, which their holders may
// still reclaim.
func (f *fileLocks) reset(now time.Time, ttl time.Duration, fresh bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	grace := ttl
	if fresh {
		grace = 0
	}
	f.table = locks.New(ttl, grace, now, 0)
}

// with runs fn on the table after expiring lapsed sessions (at most once a
// second); it fails when this master has no table (it does not lead).
func (f *fileLocks) with(now time.Time, fn func(t *locks.Table) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.table == nil {
		return chunkfs.E("lock", "", chunkfs.KindUnavailable, "lock table not ready")
	}
	if now.Sub(f.lastExpire) >= time.Second {
		f.table.Expire(now)
		f.lastExpire = now
	}
	return fn(f.table)
}

// lockHolder is who a call's lock sessions belong to: its peer's
// certificate identity (role, name and UID), so that a session opened by
// one mount or client is refused to every other; "" on a plain
// connection, where every caller is trusted.
func lockHolder(ctx context.Context) string {
	id := peerIdentity(ctx)
	if id == nil {
		return ""
	}
	return fmt.Sprintf("%s/%s?uid=%d", id.Role, id.Name, id.UID)
}

// openRandom opens a session with a random ID: a holder who knows its own
// session's ID learns nothing of the others', so it cannot adopt one of
// them before its holder reclaims it after a change of leader.
func openRandom(t *locks.Table, now time.Time) (uint64, error) {
	for {
		var b [8]byte
		rand.Read(b[:])
		err := t.OpenID(binary.BigEndian.Uint64(b[:]), now)
		if !errors.Is(err, locks.ErrInvalid) {
			return binary.BigEndian.Uint64(b[:]), err
		}
	}
}

// LockSession opens, renews, adopts (reclaim) or closes a lock session,
// bound to the certificate identity that opened or adopted it.
func (m service) LockSession(ctx context.Context, req *pb.LockSessionRequest) (*pb.LockSessionResponse, error) {
	now := m.cfg.Clock.Now()
	holder := lockHolder(ctx)
	resp := &pb.LockSessionResponse{}
	err := m.locks.with(now, func(t *locks.Table) error {
		resp.TtlMs, resp.Grace = t.TTL().Milliseconds(), t.InGrace(now)
		if req.Session != 0 {
			if err := t.Claim(req.Session, holder, now); err != nil {
				return lockErr(err)
			}
		}
		switch {
		case req.Close:
			t.Close(req.Session)
			resp.Session = req.Session
		case req.Session == 0:
			id, err := openRandom(t, now)
			if err != nil {
				return lockErr(err)
			}
			resp.Session = id
		case !t.Renew(req.Session, req.Reclaim, now):
			return lockErr(locks.ErrNoSession)
		default:
			resp.Session = req.Session
		}
		if !req.Close {
			t.Claim(resp.Session, holder, now) // binds a new or adopted session
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// Lock tests, takes or releases one lock. Taking one needs the path to
// name the inode, as the caller sees it (search permission on the way).
func (m service) Lock(ctx context.Context, req *pb.LockRequest) (*pb.LockResponse, error) {
	const op = "lock"
	c, err := m.pathArg(ctx, "Lock", op, req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	l, unlock, err := lockArg(op, req)
	if err != nil {
		return nil, err
	}
	if !unlock {
		var fi chunkfs.FileInfo
		m.state.read(func(ns *namespace.Namespace) { fi, err = ns.Stat(c, req.Path) })
		switch {
		case err != nil:
			return nil, err
		case !fi.Mode().IsRegular():
			return nil, chunkfs.E(op, req.Path, chunkfs.KindInvalid, "locks are for regular files")
		case fi.Inode != req.Inode:
			return nil, chunkfs.E(op, req.Path, chunkfs.KindStale, "the path names another file now")
		}
	}
	now := m.cfg.Clock.Now()
	holder := lockHolder(ctx)
	resp := &pb.LockResponse{}
	err = m.locks.with(now, func(t *locks.Table) error {
		if err := t.Claim(l.Session, holder, now); err != nil {
			return lockErr(err)
		}
		if unlock {
			if !t.Renew(l.Session, false, now) {
				return lockErr(locks.ErrNoSession)
			}
			return lockErr(t.Unlock(req.Inode, l.Owner, l.Kind, l.Start, l.End))
		}
		if req.Test {
			if h, ok := t.Test(req.Inode, l); ok {
				resp.Conflict = lockPB(h)
			} else {
				resp.Granted = true
			}
			return nil
		}
		h, err := t.Set(req.Inode, l, req.Reclaim, now)
		if err != nil {
			return lockErr(err)
		}
		if h != (locks.Lock{}) {
			resp.Conflict = lockPB(h)
		} else {
			resp.Granted = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// lockUnlock is FileLock.type for a release.
const lockUnlock = 3

func lockArg(op string, req *pb.LockRequest) (l locks.Lock, unlock bool, err error) {
	fl := req.Lock
	if fl == nil || req.Session == 0 || req.Inode == 0 {
		return l, false, chunkfs.E(op, req.Path, chunkfs.KindInvalid, "lock, session and inode are required")
	}
	l = locks.Lock{Owner: locks.Owner{Session: req.Session, ID: fl.Owner}, Kind: locks.Kind(fl.Kind),
		Type: locks.Type(fl.Type), Start: fl.Start, End: fl.End, PID: fl.Pid}
	if fl.Type == lockUnlock {
		l.Type = locks.Read // for validation; the type does not matter to a release
		unlock = true
	}
	if l.Kind == locks.Flock {
		l.Start, l.End = 0, locks.ToEnd
	}
	if (l.Kind != locks.Posix && l.Kind != locks.Flock) || (l.Type != locks.Read && l.Type != locks.Write) || l.Start > l.End {
		return l, false, chunkfs.E(op, req.Path, chunkfs.KindInvalid, "bad lock kind, type or range")
	}
	return l, unlock, nil
}

func lockPB(l locks.Lock) *pb.FileLock {
	return &pb.FileLock{Kind: uint32(l.Kind), Type: uint32(l.Type), Start: l.Start, End: l.End, Owner: l.ID, Pid: l.PID, Session: l.Session}
}

// lockErr gives the table's errors their kinds: a lapsed session or the
// grace period is retriable, too many locks is no space, another holder's
// session is permission denied.
func lockErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, locks.ErrNoSession):
		return &chunkfs.Error{Op: "lock", Kind: chunkfs.KindNotExist, Err: err}
	case errors.Is(err, locks.ErrGrace):
		return &chunkfs.Error{Op: "lock", Kind: chunkfs.KindUnavailable, Err: err}
	case errors.Is(err, locks.ErrTooMany):
		return &chunkfs.Error{Op: "lock", Kind: chunkfs.KindNoSpace, Err: err}
	case errors.Is(err, locks.ErrNotHolder):
		return &chunkfs.Error{Op: "lock", Kind: chunkfs.KindPermission, Err: fmt.Errorf("%v: %w", chunkfs.KindPermission, err)}
	}
	return &chunkfs.Error{Op: "lock", Kind: chunkfs.KindInvalid, Err: err}
}
