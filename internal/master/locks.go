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

// sessionState is a lock session as its holder is told: its ID, how long
// it lives after a renewal, and whether the table is in its grace period.
type sessionState struct {
	id    uint64
	ttl   time.Duration
	grace bool
}

// lockSession opens (id 0), renews, adopts (reclaim) or closes (close) a
// lock session for holder, bound to the holder.
func (m *Master) lockSession(holder string, id uint64, close, reclaim bool) (sessionState, error) {
	now := m.cfg.Clock.Now()
	var st sessionState
	err := m.locks.with(now, func(t *locks.Table) error {
		st.ttl, st.grace = t.TTL(), t.InGrace(now)
		if id != 0 {
			if err := t.Claim(id, holder, now); err != nil {
				return lockErr(err)
			}
		}
		switch {
		case close:
			t.Close(id)
			st.id = id
		case id == 0:
			var err error
			if st.id, err = openRandom(t, now); err != nil {
				return lockErr(err)
			}
		case !t.Renew(id, reclaim, now):
			return lockErr(locks.ErrNoSession)
		default:
			st.id = id
		}
		if !close {
			t.Claim(st.id, holder, now) // binds a new or adopted session
		}
		return nil
	})
	return st, err
}

// lockCall is one lock call: test, take or release lock on inode, the
// regular file at path.
type lockCall struct {
	path                  string
	inode                 uint64
	lock                  locks.Lock
	unlock, test, reclaim bool
}

// lockAnswer is a lock call's outcome: granted, or the lock in the way.
type lockAnswer struct {
	granted  bool
	conflict *locks.Lock
}

// fileLock runs call for holder, as c; taking or testing a lock needs the
// path to name the inode as c sees it.
func (m *Master) fileLock(c chunkfs.Caller, holder string, call lockCall) (lockAnswer, error) {
	const op = "lock"
	if !call.unlock {
		var fi chunkfs.FileInfo
		var err error
		m.state.read(func(ns *namespace.Namespace) { fi, err = ns.Stat(c, call.path) })
		switch {
		case err != nil:
			return lockAnswer{}, err
		case !fi.Mode().IsRegular():
			return lockAnswer{}, chunkfs.E(op, call.path, chunkfs.KindInvalid, "locks are for regular files")
		case fi.Inode != call.inode:
			return lockAnswer{}, chunkfs.E(op, call.path, chunkfs.KindStale, "the path names another file now")
		}
	}
	now := m.cfg.Clock.Now()
	l := call.lock
	var a lockAnswer
	err := m.locks.with(now, func(t *locks.Table) error {
		if err := t.Claim(l.Session, holder, now); err != nil {
			return lockErr(err)
		}
		if call.unlock {
			if !t.Renew(l.Session, false, now) {
				return lockErr(locks.ErrNoSession)
			}
			return lockErr(t.Unlock(call.inode, l.Owner, l.Kind, l.Start, l.End))
		}
		if call.test {
			if h, ok := t.Test(call.inode, l); ok {
				a.conflict = &h
			} else {
				a.granted = true
			}
			return nil
		}
		h, err := t.Set(call.inode, l, call.reclaim, now)
		if err != nil {
			return lockErr(err)
		}
		if h != (locks.Lock{}) {
			a.conflict = &h
		} else {
			a.granted = true
		}
		return nil
	})
	return a, err
}
