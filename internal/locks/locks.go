// Package locks is the lock table of a cluster: POSIX record locks
// (fcntl) and flock locks on files, held by the owners of lock sessions.
//
// A session is one mount's (or client's) standing with the lock table: it
// lives while it is renewed, and when it lapses every lock it holds goes,
// so a mount that dies cannot keep a file locked for ever. Locks live in
// the memory of the leading master only, as CephFS's MDS and NFSv4 servers
// keep them: after a change of leader the new table is empty and stays in
// a grace period of one session lifetime, in which only reclaims (a
// session re-asserting locks it held) are granted.
//
// A session may be bound to a holder, the authenticated identity that
// opened or adopted it (Claim): then only that holder may use it, so that
// no client can release, renew or close another's locks by naming its
// session.
//
// The package is pure: no goroutines, no clock reads; every call that
// depends on time takes now. A Table is not safe for concurrent use.
package locks

import (
	"errors"
	"math"
	"slices"
	"time"
)

// Kind is the family of a lock. POSIX locks and flock locks do not
// conflict with each other, as on Linux.
type Kind uint8

const (
	Posix Kind = 1 // fcntl record locks, owned by a process
	Flock Kind = 2 // flock(2) whole-file locks, owned by an open file
)

// Type is a lock's mode.
type Type uint8

const (
	Read  Type = 1 // shared
	Write Type = 2 // exclusive
)

// ToEnd is the End of a range that runs to the end of the file, however
// long it grows.
const ToEnd = math.MaxUint64

// Owner holds locks: a session and the owner the kernel names within it
// (a process's files table for POSIX locks, an open file for flock).
type Owner struct {
	Session uint64
	ID      uint64
}

// Lock is a held or wanted lock on the byte range [Start, End] (End
// inclusive) of one file.
type Lock struct {
	Owner
	Kind  Kind
	Type  Type
	Start uint64
	End   uint64
	PID   uint32 // the process that took it, for F_GETLK
}

func (l Lock) overlaps(m Lock) bool { return l.Start <= m.End && m.Start <= l.End }

// conflicts reports whether l and m cannot both be held.
func (l Lock) conflicts(m Lock) bool {
	return l.Kind == m.Kind && l.Owner != m.Owner && l.overlaps(m) && (l.Type == Write || m.Type == Write)
}

// Bounds on what one table and one session hold, so that a hostile or
// broken client cannot grow the leader's memory without bound (a Table's
// defaults; tests lower them).
const (
	MaxLocks        = 1 << 20
	MaxSessionLocks = 1 << 14
	MaxSessions     = 1 << 16
)

// Errors of the table's calls.
var (
	ErrNoSession = errors.New("lock session expired or unknown")
	ErrGrace     = errors.New("lock table in its grace period after a master change: only reclaims are granted")
	ErrTooMany   = errors.New("too many locks")
	ErrInvalid   = errors.New("invalid lock")
	ErrNotHolder = errors.New("lock session belongs to another client")
)

// Table is the cluster's lock table.
type Table struct {
	ttl        time.Duration
	graceUntil time.Time
	files      map[uint64][]Lock // inode → locks held on it
	sessions   map[uint64]*session
	next       uint64 // last session ID handed out
	count      int
	// maxLocks and maxSession bound the locks held in all and by one
	// session.
	maxLocks, maxSession int
}

type session struct {
	holder string // who may use it; "": not bound yet
	expiry time.Time
	count  int
	files  map[uint64]int // inode → locks held on it
}

// New returns an empty table whose sessions live ttl after their last
// renewal; it grants only reclaims until now+grace.
func New(ttl, grace time.Duration, now time.Time, firstSession uint64) *Table {
	return &Table{ttl: ttl, graceUntil: now.Add(grace), files: map[uint64][]Lock{}, sessions: map[uint64]*session{},
		next: firstSession, maxLocks: MaxLocks, maxSession: MaxSessionLocks}
}

// TTL is a session's lifetime after a renewal.
func (t *Table) TTL() time.Duration { return t.ttl }

// InGrace reports whether only reclaims are granted at now.
func (t *Table) InGrace(now time.Time) bool { return now.Before(t.graceUntil) }

// Open starts a new session, numbered after the last.
func (t *Table) Open(now time.Time) (uint64, error) {
	if err := t.room(now); err != nil {
		return 0, err
	}
	t.next++
	for t.next == 0 || t.sessions[t.next] != nil { // an adopted session's ID
		t.next++
	}
	t.sessions[t.next] = &session{expiry: now.Add(t.ttl), files: map[uint64]int{}}
	return t.next, nil
}

// OpenID starts a new session numbered id, which the caller draws at
// random so that no one can guess another holder's session (and adopt it
// first in a grace period). It fails with ErrInvalid if id is 0 or
// taken: draw again.
func (t *Table) OpenID(id uint64, now time.Time) error {
	if err := t.room(now); err != nil {
		return err
	}
	if id == 0 || t.sessions[id] != nil {
		return ErrInvalid
	}
	t.sessions[id] = &session{expiry: now.Add(t.ttl), files: map[uint64]int{}}
	return nil
}

// room makes room for a new session, expiring lapsed ones if the table
// is full; ErrTooMany if it stays full.
func (t *Table) room(now time.Time) error {
	if len(t.sessions) >= MaxSessions {
		t.Expire(now)
		if len(t.sessions) >= MaxSessions {
			return ErrTooMany
		}
	}
	return nil
}

// Renew extends a live session, or, when reclaim is set, adopts a session
// this table does not know (one opened under an earlier leader) so that
// its holder can reclaim its locks. It reports whether the session lives.
// New sessions never take an adopted session's ID; the master starts each
// table's IDs at a random point, so that they do not run into the IDs of
// an earlier leader's sessions that are yet to reclaim.
func (t *Table) Renew(id uint64, reclaim bool, now time.Time) bool {
	s, ok := t.sessions[id]
	if !ok || now.After(s.expiry) {
		if ok {
			t.drop(id) // a lapsed session's locks go before any adoption
		}
		if !reclaim || id == 0 || !t.InGrace(now) {
			return false
		}
		s = &session{files: map[uint64]int{}}
		t.sessions[id] = s
	}
	s.expiry = now.Add(t.ttl)
	return true
}

// Claim checks that holder may use session id, binding the session to
// holder if it is bound to no one yet (it was just opened or adopted).
// A session another holder is bound to is refused with ErrNotHolder; an
// unknown or lapsed session passes, for the call that follows to fail on
// (or, reclaiming, to adopt). Callers claim a session before every use.
func (t *Table) Claim(id uint64, holder string, now time.Time) error {
	s, ok := t.sessions[id]
	switch {
	case !ok || now.After(s.expiry):
		return nil
	case s.holder == "":
		s.holder = holder
		return nil
	case s.holder != holder:
		return ErrNotHolder
	}
	return nil
}

// Close ends a session, releasing its locks.
func (t *Table) Close(id uint64) { t.drop(id) }

// Expire ends every session not renewed in time, releasing its locks, and
// returns their IDs.
func (t *Table) Expire(now time.Time) []uint64 {
	var gone []uint64
	for id, s := range t.sessions {
		if now.After(s.expiry) {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	for _, id := range gone {
		t.drop(id)
	}
	return gone
}

func (t *Table) drop(id uint64) {
	s, ok := t.sessions[id]
	if !ok {
		return
	}
	for ino := range s.files {
		t.replace(ino, slices.DeleteFunc(t.files[ino], func(l Lock) bool { return l.Session == id }))
	}
	delete(t.sessions, id)
}

// replace sets inode's locks to ls, keeping the counts.
func (t *Table) replace(ino uint64, ls []Lock) {
	for _, l := range t.files[ino] {
		t.count--
		if s := t.sessions[l.Session]; s != nil {
			s.count--
			if s.files[ino]--; s.files[ino] == 0 {
				delete(s.files, ino)
			}
		}
	}
	if len(ls) == 0 {
		delete(t.files, ino)
		return
	}
	t.files[ino] = ls
	for _, l := range ls {
		t.count++
		if s := t.sessions[l.Session]; s != nil {
			s.count++
			s.files[ino]++
		}
	}
}

func valid(l Lock) bool {
	return (l.Kind == Posix || l.Kind == Flock) && (l.Type == Read || l.Type == Write) && l.Start <= l.End &&
		(l.Kind == Posix || l.Start == 0 && l.End == ToEnd)
}

// Test returns a lock another owner holds on ino that conflicts with l,
// as F_GETLK.
func (t *Table) Test(ino uint64, l Lock) (Lock, bool) {
	for _, h := range t.files[ino] {
		if h.conflicts(l) {
			return h, true
		}
	}
	return Lock{}, false
}

// Set grants l on ino, or returns the lock that conflicts with it. The
// owner's own locks of l's kind in l's range are replaced (POSIX: a lock
// on a range an owner already holds converts it; adjacent or overlapping
// locks of one type merge). During the grace period only a reclaim is
// granted.
func (t *Table) Set(ino uint64, l Lock, reclaim bool, now time.Time) (conflict Lock, err error) {
	if !valid(l) {
		return Lock{}, ErrInvalid
	}
	s, ok := t.sessions[l.Session]
	if !ok || now.After(s.expiry) {
		return Lock{}, ErrNoSession
	}
	if !reclaim && t.InGrace(now) {
		return Lock{}, ErrGrace
	}
	if c, ok := t.Test(ino, l); ok {
		return c, nil
	}
	ls := merge(unlock(t.files[ino], l.Owner, l.Kind, l.Start, l.End), l)
	grow := len(ls) - len(t.files[ino])
	if t.count+grow > t.maxLocks || s.count+grow > t.maxSession {
		return Lock{}, ErrTooMany
	}
	t.replace(ino, ls)
	return Lock{}, nil
}

// Unlock releases the owner's locks of kind on [start, end] of ino,
// splitting a lock that reaches outside the range.
func (t *Table) Unlock(ino uint64, o Owner, kind Kind, start, end uint64) error {
	if start > end {
		return ErrInvalid
	}
	if kind == Flock {
		start, end = 0, ToEnd
	}
	t.replace(ino, unlock(t.files[ino], o, kind, start, end))
	return nil
}

// Held returns the locks held on ino, sorted by owner and start.
func (t *Table) Held(ino uint64) []Lock {
	ls := slices.Clone(t.files[ino])
	slices.SortFunc(ls, func(a, b Lock) int {
		switch {
		case a.Session != b.Session:
			return cmpU(a.Session, b.Session)
		case a.ID != b.ID:
			return cmpU(a.ID, b.ID)
		case a.Kind != b.Kind:
			return int(a.Kind) - int(b.Kind)
		}
		return cmpU(a.Start, b.Start)
	})
	return ls
}

// Count is the number of locks held.
func (t *Table) Count() int { return t.count }

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// unlock returns ls without o's locks of kind on [start, end], the parts
// of them outside it kept. ls is not modified.
func unlock(ls []Lock, o Owner, kind Kind, start, end uint64) []Lock {
	out := make([]Lock, 0, len(ls)+1)
	for _, l := range ls {
		if l.Owner != o || l.Kind != kind || l.End < start || l.Start > end {
			out = append(out, l)
			continue
		}
		if l.Start < start {
			left := l
			left.End = start - 1
			out = append(out, left)
		}
		if l.End > end {
			right := l
			right.Start = end + 1
			out = append(out, right)
		}
	}
	return out
}

// merge adds l to ls (which holds none of its owner's locks of its kind
// inside its range), joining it with that owner's locks of its kind and
// type that touch it.
func merge(ls []Lock, l Lock) []Lock {
	out := make([]Lock, 0, len(ls)+1)
	for _, m := range ls {
		if m.Owner == l.Owner && m.Kind == l.Kind && m.Type == l.Type && touches(m, l) {
			l.Start, l.End = min(l.Start, m.Start), max(l.End, m.End)
			continue
		}
		out = append(out, m)
	}
	return append(out, l)
}

// touches reports whether two ranges overlap or are adjacent.
func touches(a, b Lock) bool {
	return a.Start <= b.End && b.Start <= a.End || a.End != ToEnd && a.End+1 == b.Start || b.End != ToEnd && b.End+1 == a.Start
}
