package fusefs

import (
	"context"
	"log/slog"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/locks"
)

// File locks (fcntl record locks and flock) hold across mounts: the mount
// forwards them to the cluster's lock table (internal/locks, kept by the
// leading master) under one lock session, which a goroutine renews. It
// keeps its own record of what it holds, in a table of the same kind, so
// that after a change of leader (the new one knows no session, and grants
// only reclaims for a while) it adopts its session again and re-asserts
// every lock. A lock another mount took meanwhile, or one the cluster
// forgot because the session lapsed, is lost: the mount logs it, as an
// NFS client does.
type lockManager struct {
	b   Backend
	log *slog.Logger

	mu      sync.Mutex
	session uint64 // 0 until the first lock
	ttl     time.Duration
	held    *locks.Table // what this mount holds, under local session 1
	paths   map[uint64]string
	stop    chan struct{}
	done    chan struct{}
}

const localSession = 1

func newLockManager(b Backend, log *slog.Logger) *lockManager {
	lm := &lockManager{b: b, log: log, paths: map[uint64]string{}}
	lm.held = locks.New(100*365*24*time.Hour, 0, time.Now(), 0)
	lm.held.Open(time.Now()) // local session 1
	return lm
}

// sessionID returns the mount's lock session, opening it (and starting
// its renewals) on first use.
func (lm *lockManager) sessionID(ctx context.Context) (uint64, error) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.session != 0 {
		return lm.session, nil
	}
	id, ttl, err := lm.b.LockSession(ctx, 0, false, false)
	if err != nil {
		return 0, err
	}
	lm.session, lm.ttl = id, ttl
	lm.stop, lm.done = make(chan struct{}), make(chan struct{})
	go lm.renew(lm.stop, lm.done)
	return id, nil
}

// renew keeps the session alive, every third of its lifetime, and
// reclaims after a change of leader.
func (lm *lockManager) renew(stop, done chan struct{}) {
	defer close(done)
	for {
		lm.mu.Lock()
		id, every := lm.session, max(lm.ttl/3, 100*time.Millisecond)
		lm.mu.Unlock()
		select {
		case <-stop:
			return
		case <-time.After(every):
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		_, _, err := lm.b.LockSession(ctx, id, false, false)
		if chunkfs.KindOf(err) == chunkfs.KindNotExist {
			err = lm.reclaim(ctx, id)
		}
		cancel()
		if err != nil {
			lm.log.Warn("lock session not renewed", "session", id, "err", err)
		}
	}
}

// reclaim adopts the session on a new leader and re-asserts every lock
// held; when the session cannot be adopted it opens a new one and the
// locks are lost.
func (lm *lockManager) reclaim(ctx context.Context, id uint64) error {
	if _, _, err := lm.b.LockSession(ctx, id, true, false); err != nil {
		lm.mu.Lock()
		defer lm.mu.Unlock()
		lm.log.Error("file locks lost: the lock session lapsed", "session", id, "locks", lm.held.Count(), "err", err)
		lm.held.Close(localSession)
		lm.held.Open(time.Now())
		lm.paths = map[uint64]string{}
		nid, ttl, err := lm.b.LockSession(ctx, 0, false, false)
		if err == nil {
			lm.session, lm.ttl = nid, ttl
		}
		return err
	}
	lm.mu.Lock()
	defer lm.mu.Unlock()
	lost := 0
	for ino, p := range lm.paths {
		for _, l := range lm.held.Held(ino) {
			l.Session = id
			ok, _, err := lm.b.Lock(ctx, chunkfs.Root, p, ino, l, false, false, true)
			if err != nil || !ok {
				lost++
				lm.log.Error("file lock lost after a master change", "path", p, "start", l.Start, "end", l.End, "err", err)
			}
		}
	}
	lm.log.Info("file locks reclaimed", "session", id, "locks", lm.held.Count()-lost, "lost", lost)
	return nil
}

// close ends the session, releasing every lock the mount holds.
func (lm *lockManager) close() {
	lm.mu.Lock()
	id, stop, done := lm.session, lm.stop, lm.done
	lm.session = 0
	lm.mu.Unlock()
	if id == 0 {
		return
	}
	close(stop)
	<-done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lm.b.LockSession(ctx, id, false, true)
}

// set takes (or releases) l on ino through the cluster and records it.
func (lm *lockManager) set(ctx context.Context, c chunkfs.Caller, p string, ino uint64, l locks.Lock, unlock bool) (bool, locks.Lock, error) {
	id, err := lm.sessionID(ctx)
	if err != nil {
		return false, locks.Lock{}, err
	}
	l.Session = id
	ok, h, err := lm.b.Lock(ctx, c, p, ino, l, unlock, false, false)
	if err != nil || !ok && !unlock {
		return ok, h, err
	}
	lm.mu.Lock()
	defer lm.mu.Unlock()
	l.Session = localSession
	if unlock {
		lm.held.Unlock(ino, l.Owner, l.Kind, l.Start, l.End)
	} else {
		lm.held.Set(ino, l, true, time.Now())
		lm.paths[ino] = p
	}
	if len(lm.held.Held(ino)) == 0 {
		delete(lm.paths, ino)
	}
	return true, locks.Lock{}, nil
}

// test is F_GETLK through the cluster.
func (lm *lockManager) test(ctx context.Context, c chunkfs.Caller, p string, ino uint64, l locks.Lock) (bool, locks.Lock, error) {
	id, err := lm.sessionID(ctx)
	if err != nil {
		return false, locks.Lock{}, err
	}
	l.Session = id
	return lm.b.Lock(ctx, c, p, ino, l, false, true, false)
}

// offsetMax is the kernel's end of a lock range that runs to the end of
// the file (OFFSET_MAX).
const offsetMax = 1<<63 - 1

// lockOf turns a FUSE lock request into a lock of the table; unlock is set
// for F_UNLCK.
func lockOf(owner uint64, lk *fuse.FileLock, flags uint32) (l locks.Lock, unlock bool, errno syscall.Errno) {
	l = locks.Lock{Owner: locks.Owner{ID: owner}, Kind: locks.Posix, Start: lk.Start, End: lk.End, PID: lk.Pid}
	if flags&fuse.FUSE_LK_FLOCK != 0 {
		l.Kind, l.Start, l.End = locks.Flock, 0, locks.ToEnd
	}
	if l.End >= offsetMax {
		l.End = locks.ToEnd
	}
	switch lk.Typ {
	case syscall.F_RDLCK:
		l.Type = locks.Read
	case syscall.F_WRLCK:
		l.Type = locks.Write
	case syscall.F_UNLCK:
		l.Type, unlock = locks.Read, true
	default:
		return l, false, syscall.EINVAL
	}
	if l.Start > l.End {
		return l, false, syscall.EINVAL
	}
	return l, unlock, 0
}

func lockErrno(err error) syscall.Errno {
	if chunkfs.KindOf(err) == chunkfs.KindNoSpace {
		return syscall.ENOLCK
	}
	return errno(err)
}

var (
	_ = (gofs.FileGetlker)((*handle)(nil))
	_ = (gofs.FileSetlker)((*handle)(nil))
	_ = (gofs.FileSetlkwer)((*handle)(nil))
)

// Getlk is F_GETLK: the lock in the way, from any mount, or F_UNLCK.
func (h *handle) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	l, unlock, st := lockOf(owner, lk, flags)
	if st != 0 || unlock {
		return syscall.EINVAL
	}
	cctx, cancel := h.n.m.call(ctx)
	defer cancel()
	ok, c, err := h.n.m.locks.test(cctx, callerOf(ctx), h.n.path(), h.n.StableAttr().Ino, l)
	if err != nil {
		return lockErrno(err)
	}
	*out = fuse.FileLock{Typ: syscall.F_UNLCK}
	if !ok {
		out.Start, out.End, out.Pid = c.Start, min(c.End, offsetMax), c.PID
		out.Typ = syscall.F_RDLCK
		if c.Type == locks.Write {
			out.Typ = syscall.F_WRLCK
		}
	}
	return 0
}

// Setlk is F_SETLK (and flock with LOCK_NB): EAGAIN when another owner
// holds a conflicting lock.
func (h *handle) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.setlk(ctx, owner, lk, flags, false)
}

// Setlkw is F_SETLKW (and a blocking flock): it waits, polling the
// cluster, until the lock is granted or the caller is interrupted (EINTR).
func (h *handle) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.setlk(ctx, owner, lk, flags, true)
}

func (h *handle) setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, wait bool) syscall.Errno {
	l, unlock, st := lockOf(owner, lk, flags)
	if st != 0 {
		return st
	}
	if !unlock {
		h.mu.Lock()
		if h.lockOwners == nil {
			h.lockOwners = map[lockOwner]bool{}
		}
		h.lockOwners[lockOwner{l.Kind, owner}] = true
		h.mu.Unlock()
	}
	caller, p, ino := callerOf(ctx), h.n.path(), h.n.StableAttr().Ino
	backoff := 10 * time.Millisecond
	for {
		var ok bool
		var err error
		if unlock {
			// A release must not be lost to the caller's interrupt.
			cctx, cancel := h.n.m.fileChange(ctx)
			ok, _, err = h.n.m.locks.set(cctx, caller, p, ino, l, true)
			cancel()
		} else {
			cctx, cancel := h.n.m.call(ctx)
			ok, _, err = h.n.m.locks.set(cctx, caller, p, ino, l, false)
			cancel()
		}
		switch {
		case err != nil && chunkfs.KindOf(err) != chunkfs.KindUnavailable:
			return lockErrno(err)
		case err == nil && ok:
			return 0
		case err == nil && !wait:
			return syscall.EAGAIN
		}
		// A conflict to wait out, or the grace period after a master change.
		select {
		case <-ctx.Done():
			return syscall.EINTR
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// lockOwner is an owner of locks taken through an open file.
type lockOwner struct {
	kind  locks.Kind
	owner uint64
}

// releaseLocks drops, when the open file is released, the locks taken
// through it: the flock locks, whose owner is the open file, and the
// POSIX locks of the owners that took them through it. The kernel does
// not send their release (for POSIX locks it names the owner in its
// flush, which go-fuse does not pass on), so a process's POSIX locks on a
// file go when the descriptor they were taken through is released, not
// at the close of any other descriptor of the file as POSIX has it.
func (h *handle) releaseLocks() {
	h.mu.Lock()
	owners := h.lockOwners
	h.lockOwners = nil
	h.mu.Unlock()
	for o := range owners {
		ctx, cancel := h.n.m.fileChange(context.Background())
		l := locks.Lock{Owner: locks.Owner{ID: o.owner}, Kind: o.kind, Type: locks.Read, End: locks.ToEnd}
		if _, _, err := h.n.m.locks.set(ctx, chunkfs.Root, h.n.path(), h.n.StableAttr().Ino, l, true); err != nil {
			h.n.m.log.Warn("lock not released", "path", h.n.path(), "err", err)
		}
		cancel()
	}
}
