package master

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/locks"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

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
