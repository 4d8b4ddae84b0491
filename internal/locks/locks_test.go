package locks

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func newTable(t *testing.T) (*Table, uint64, uint64) {
	t.Helper()
	tb := New(10*time.Second, 0, t0, 0)
	return tb, open(t, tb), open(t, tb)
}

func open(t *testing.T, tb *Table) uint64 {
	t.Helper()
	id, err := tb.Open(t0)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func posix(s, id uint64, typ Type, start, end uint64) Lock {
	return Lock{Owner: Owner{s, id}, Kind: Posix, Type: typ, Start: start, End: end}
}

func mustSet(t *testing.T, tb *Table, ino uint64, l Lock) {
	t.Helper()
	c, err := tb.Set(ino, l, false, t0)
	if err != nil || c != (Lock{}) {
		t.Fatalf("set %+v: conflict %+v, %v", l, c, err)
	}
}

func ranges(ls []Lock) string {
	s := ""
	for _, l := range ls {
		s += fmt.Sprintf("[%d:%d-%d %d]", l.ID, l.Start, l.End, l.Type)
	}
	return s
}

func TestConflicts(t *testing.T) {
	tb, a, b := newTable(t)
	mustSet(t, tb, 1, posix(a, 1, Read, 0, 99))
	mustSet(t, tb, 1, posix(b, 1, Read, 50, 150)) // shared locks coexist
	if c, _ := tb.Set(1, posix(b, 1, Write, 90, 95), false, t0); c.Session != a {
		t.Errorf("write over another's read lock: conflict %+v", c)
	}
	mustSet(t, tb, 1, posix(b, 1, Write, 100, 150)) // converts b's own range, outside a's
	if c, ok := tb.Test(1, posix(a, 1, Write, 120, 120)); !ok || c.Session != b || c.Type != Write {
		t.Errorf("F_GETLK: %+v %v", c, ok)
	}
	if _, ok := tb.Test(2, posix(a, 1, Write, 0, ToEnd)); ok {
		t.Error("a lock on another inode conflicts")
	}
	// POSIX and flock locks do not conflict; flocks conflict with flocks.
	fl := Lock{Owner: Owner{a, 7}, Kind: Flock, Type: Write, Start: 0, End: ToEnd}
	mustSet(t, tb, 1, fl)
	if c, _ := tb.Set(1, Lock{Owner: Owner{b, 8}, Kind: Flock, Type: Read, End: ToEnd}, false, t0); c.ID != 7 {
		t.Errorf("flock conflict: %+v", c)
	}
	// The same owner never conflicts with itself.
	mustSet(t, tb, 1, posix(a, 1, Read, 0, 10))
}

func TestSplitAndMerge(t *testing.T) {
	tb, a, _ := newTable(t)
	mustSet(t, tb, 1, posix(a, 1, Write, 0, 99))
	if err := tb.Unlock(1, Owner{a, 1}, Posix, 40, 59); err != nil {
		t.Fatal(err)
	}
	if got := ranges(tb.Held(1)); got != "[1:0-39 2][1:60-99 2]" {
		t.Errorf("after unlocking the middle: %s", got)
	}
	mustSet(t, tb, 1, posix(a, 1, Read, 30, 69)) // converts the edges, fills the gap
	if got := ranges(tb.Held(1)); got != "[1:0-29 2][1:30-69 1][1:70-99 2]" {
		t.Errorf("after a read lock across: %s", got)
	}
	mustSet(t, tb, 1, posix(a, 1, Write, 30, 69)) // adjacent write locks merge
	if got := ranges(tb.Held(1)); got != "[1:0-99 2]" {
		t.Errorf("after merging: %s", got)
	}
	mustSet(t, tb, 1, posix(a, 1, Write, 100, ToEnd))
	if got := ranges(tb.Held(1)); got != fmt.Sprintf("[1:0-%d 2]", uint64(ToEnd)) {
		t.Errorf("to the end: %s", got)
	}
	tb.Unlock(1, Owner{a, 1}, Posix, 0, ToEnd)
	if tb.Count() != 0 || len(tb.Held(1)) != 0 {
		t.Errorf("after unlocking all: %d held", tb.Count())
	}
}

// TestClaimBindsSessions: the first holder to claim a session owns it;
// another is refused with ErrNotHolder until the session lapses, and a
// session adopted by a reclaim belongs to its adopter.
func TestClaimBindsSessions(t *testing.T) {
	tb, a, b := newTable(t)
	if err := tb.Claim(a, "alice", t0); err != nil {
		t.Fatal(err)
	}
	if err := tb.Claim(b, "bob", t0); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"bob", ""} {
		if err := tb.Claim(a, h, t0); !errors.Is(err, ErrNotHolder) {
			t.Errorf("%q claiming alice's session: %v", h, err)
		}
	}
	if err := tb.Claim(a, "alice", t0); err != nil {
		t.Errorf("alice claiming her own session: %v", err)
	}
	if err := tb.Claim(12345, "bob", t0); err != nil {
		t.Errorf("an unknown session: %v; want the call that follows to fail", err)
	}
	// A lapsed session binds no one; its locks go, and an adopter owns it.
	mustSet(t, tb, 1, posix(a, 1, Write, 0, ToEnd))
	late := t0.Add(11 * time.Second)
	if err := tb.Claim(a, "bob", late); err != nil {
		t.Errorf("claiming a lapsed session: %v", err)
	}
	nt := New(10*time.Second, 10*time.Second, t0, 100)
	if !nt.Renew(a, true, t0) {
		t.Fatal("reclaim not adopted")
	}
	if err := nt.Claim(a, "alice", t0); err != nil {
		t.Fatal(err)
	}
	if err := nt.Claim(a, "mallory", t0); !errors.Is(err, ErrNotHolder) {
		t.Errorf("mallory claiming alice's adopted session: %v", err)
	}
}

// TestRenewOfLapsedSessionDropsItsLocks: a session that lapsed before the
// table expired it loses its locks when it is renewed, even when a
// reclaim adopts its ID again.
func TestRenewOfLapsedSessionDropsItsLocks(t *testing.T) {
	nt := New(10*time.Second, time.Minute, t0, 100)
	if !nt.Renew(7, true, t0) {
		t.Fatal("adopting 7")
	}
	if _, err := nt.Set(1, posix(7, 1, Write, 0, ToEnd), true, t0); err != nil {
		t.Fatal(err)
	}
	if !nt.Renew(7, true, t0.Add(20*time.Second)) {
		t.Fatal("re-adopting 7 in the grace period")
	}
	if nt.Count() != 0 || len(nt.Held(1)) != 0 {
		t.Errorf("the lapsed session's locks stayed: %v", nt.Held(1))
	}
	nt.Close(7)
}

func TestSessionsExpireAndGrace(t *testing.T) {
	tb, a, b := newTable(t)
	mustSet(t, tb, 1, posix(a, 1, Write, 0, ToEnd))
	if !tb.Renew(b, false, t0.Add(8*time.Second)) {
		t.Fatal("renew of a live session failed")
	}
	if gone := tb.Expire(t0.Add(11 * time.Second)); !slices.Equal(gone, []uint64{a}) {
		t.Errorf("expired %v, want [%d]", gone, a)
	}
	if _, err := tb.Set(1, posix(a, 1, Read, 0, 0), false, t0.Add(11*time.Second)); !errors.Is(err, ErrNoSession) {
		t.Errorf("set on an expired session: %v", err)
	}
	if tb.Renew(a, false, t0.Add(11*time.Second)) {
		t.Error("an expired session was renewed")
	}
	if c, err := tb.Set(1, posix(b, 1, Write, 0, ToEnd), false, t0.Add(11*time.Second)); err != nil || c != (Lock{}) {
		t.Errorf("the dead session's lock was not released: %+v %v", c, err)
	}
	// A new table (a new leader) grants only reclaims in its grace period,
	// and adopts sessions it does not know when they reclaim.
	nt := New(10*time.Second, 10*time.Second, t0, 100)
	if nt.Renew(a, false, t0) {
		t.Error("unknown session renewed without reclaim")
	}
	if !nt.Renew(a, true, t0) {
		t.Fatal("reclaiming session not adopted in the grace period")
	}
	if _, err := nt.Set(1, posix(a, 1, Write, 0, 9), false, t0); !errors.Is(err, ErrGrace) {
		t.Errorf("new lock in the grace period: %v", err)
	}
	if _, err := nt.Set(1, posix(a, 1, Write, 0, 9), true, t0); err != nil {
		t.Errorf("reclaim in the grace period: %v", err)
	}
	// New sessions skip adopted IDs: adopt 102, and the table, counting
	// from 100, hands out 101 and then 103.
	if !nt.Renew(102, true, t0) {
		t.Fatal("adopting 102")
	}
	if x, y := open(t, nt), open(t, nt); x != 101 || y != 103 {
		t.Errorf("new sessions %d, %d; want 101, 103 (102 is adopted)", x, y)
	}
	if nt.Renew(b, true, t0.Add(11*time.Second)) {
		t.Error("session adopted after the grace period")
	}
	nt.Close(a)
	if nt.Count() != 0 {
		t.Error("closing a session left its locks")
	}
}

func TestInvalidAndBounded(t *testing.T) {
	tb, a, _ := newTable(t)
	for _, l := range []Lock{
		posix(a, 1, 0, 0, 1), posix(a, 1, 3, 0, 1), posix(a, 1, Read, 5, 4),
		{Owner: Owner{a, 1}, Kind: 9, Type: Read},
		{Owner: Owner{a, 1}, Kind: Flock, Type: Read, Start: 0, End: 10}, // flock is whole-file
	} {
		if _, err := tb.Set(1, l, false, t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("set %+v: %v", l, err)
		}
	}
	tb.maxSession = 100
	for i := range uint64(100) {
		mustSet(t, tb, 1, posix(a, 1, Read, 2*i, 2*i))
	}
	if _, err := tb.Set(1, posix(a, 1, Read, 1<<40, 1<<40), false, t0); !errors.Is(err, ErrTooMany) {
		t.Errorf("lock beyond the session bound: %v", err)
	}
	mustSet(t, tb, 1, posix(a, 1, Read, 0, 4)) // merging within bounds still works
}

// TestRandomAgainstModel checks Set, Unlock, Test and expiry against a
// byte-by-byte model of who holds what.
func TestRandomAgainstModel(t *testing.T) {
	const size = 40
	type cell map[Owner]Type // per byte: owners and their type
	rng := rand.New(rand.NewPCG(1, 2))
	tb := New(time.Hour, 0, t0, 0)
	s1, s2 := open(t, tb), open(t, tb)
	owners := []Owner{{s1, 1}, {s1, 2}, {s2, 1}}
	model := make([]cell, size)
	for i := range model {
		model[i] = cell{}
	}
	for step := range 2000 {
		o := owners[rng.IntN(len(owners))]
		start := uint64(rng.IntN(size))
		end := start + uint64(rng.IntN(size-int(start)))
		if rng.IntN(3) == 0 {
			tb.Unlock(1, o, Posix, start, end)
			for i := start; i <= end; i++ {
				delete(model[i], o)
			}
		} else {
			typ := Type(1 + rng.IntN(2))
			c, err := tb.Set(1, Lock{Owner: o, Kind: Posix, Type: typ, Start: start, End: end}, false, t0)
			if err != nil {
				t.Fatal(err)
			}
			conflict := false
			for i := start; i <= end; i++ {
				for p, pt := range model[i] {
					if p != o && (typ == Write || pt == Write) {
						conflict = true
					}
				}
			}
			if conflict != (c != Lock{}) {
				t.Fatalf("step %d: set %v %d-%d %d: conflict %+v, model says %v", step, o, start, end, typ, c, conflict)
			}
			if !conflict {
				for i := start; i <= end; i++ {
					model[i][o] = typ
				}
			}
		}
		// The table's locks cover exactly the model's cells, without overlap
		// or touching ranges of one owner and type.
		got := make([]cell, size)
		for i := range got {
			got[i] = cell{}
		}
		held := tb.Held(1)
		for i, l := range held {
			for j := l.Start; j <= l.End; j++ {
				if _, dup := got[j][l.Owner]; dup {
					t.Fatalf("step %d: byte %d held twice by %v: %s", step, j, l.Owner, ranges(held))
				}
				got[j][l.Owner] = l.Type
			}
			if i > 0 && held[i-1].Owner == l.Owner && held[i-1].Type == l.Type && touches(held[i-1], l) {
				t.Fatalf("step %d: unmerged ranges %s", step, ranges(held))
			}
		}
		for i := range model {
			if !maps.Equal(model[i], got[i]) {
				t.Fatalf("step %d: byte %d: model %v, table %v", step, i, model[i], got[i])
			}
		}
	}
}

// TestOpenID: a session opened with a chosen ID is a session like any
// other; 0 and a taken ID are refused, and Open skips chosen IDs.
func TestOpenID(t *testing.T) {
	tb := New(10*time.Second, 0, t0, 100)
	if err := tb.OpenID(101, t0); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{0, 101} {
		if err := tb.OpenID(id, t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("OpenID(%d): %v; want ErrInvalid", id, err)
		}
	}
	mustSet(t, tb, 1, posix(101, 1, Write, 0, ToEnd))
	if id := open(t, tb); id != 102 {
		t.Errorf("Open after OpenID(101) = %d, want 102", id)
	}
	if !tb.Renew(101, false, t0.Add(5*time.Second)) {
		t.Error("a chosen-ID session was not renewed")
	}
	tb.Close(101)
	if tb.Count() != 0 {
		t.Error("closing it left its locks")
	}
}
