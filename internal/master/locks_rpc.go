package master

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/locks"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// LockSession opens, renews, adopts (reclaim) or closes a lock session,
// bound to the certificate identity that opened or adopted it.
func (m service) LockSession(ctx context.Context, req *pb.LockSessionRequest) (*pb.LockSessionResponse, error) {
	st, err := m.lockSession(lockHolder(ctx), req.Session, req.Close, req.Reclaim)
	if err != nil {
		return nil, err
	}
	return &pb.LockSessionResponse{Session: st.id, TtlMs: st.ttl.Milliseconds(), Grace: st.grace}, nil
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
	a, err := m.fileLock(c, lockHolder(ctx), lockCall{path: req.Path, inode: req.Inode, lock: l, unlock: unlock, test: req.Test, reclaim: req.Reclaim})
	if err != nil {
		return nil, err
	}
	resp := &pb.LockResponse{Granted: a.granted}
	if a.conflict != nil {
		resp.Conflict = lockPB(*a.conflict)
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
