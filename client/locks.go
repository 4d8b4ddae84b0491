package client

import (
	"context"
	"time"

	"github.com/chunkfs/chunkfs/internal/reqid"
)

// File locks are POSIX record locks and flock locks kept by the leading
// master for lock sessions: a session lives while its holder renews it
// (every third of its lifetime is safe), and when it lapses its locks go.
// After a change of leader the new one knows no session; for one session
// lifetime (the grace period) it grants only reclaims, in which holders
// re-assert the locks they held: renew with reclaim set, then Lock each
// with reclaim set. The mount does all of this; most programs need not.

// Lock kinds and types, as the master's lock table has them.
const (
	LockPosix = 1 // fcntl record locks
	LockFlock = 2 // flock(2) whole-file locks

	LockRead   = 1
	LockWrite  = 2
	LockUnlock = 3
)

// LockToEnd is the End of a range reaching the end of the file.
const LockToEnd = ^uint64(0)

// FileLock is a lock on the byte range [Start, End] of a file.
type FileLock struct {
	Kind    int
	Type    int
	Start   uint64
	End     uint64 // inclusive; LockToEnd: to the end of the file
	Owner   uint64 // the owner within the session
	PID     uint32
	Session uint64 // in a conflict: the holder's session
}

// LockSession opens a session (session 0), renews one, adopts one after
// a master change (reclaim), or closes one (close). It returns the
// session, its lifetime, and whether the table grants only reclaims now.
func (c *Client) LockSession(ctx context.Context, session uint64, reclaim, close bool) (uint64, time.Duration, bool, error) {
	ctx = reqid.Ensure(ctx)
	s, ttl, grace, err := c.lockSessionCall(ctx, session, reclaim, close)
	if err != nil {
		return 0, 0, false, wrapOp("lock session", "", err)
	}
	return s, ttl, grace, nil
}

// Lock tests (test), takes or releases (Type LockUnlock) lock l of session
// on the file at path, whose inode is inode. It reports whether the lock
// was granted (for a test: whether it would be), or the lock that
// conflicts.
func (c *Client) Lock(ctx context.Context, path string, inode, session uint64, l FileLock, test, reclaim bool) (bool, FileLock, error) {
	ctx = reqid.Ensure(ctx)
	path, err := checkPath("lock", path)
	if err != nil {
		return false, FileLock{}, err
	}
	granted, h, err := c.lockCall(ctx, path, inode, session, l, test, reclaim)
	if err != nil {
		return false, FileLock{}, wrapOp("lock", path, err)
	}
	return granted, h, nil
}
