package chunkserver

import (
	"fmt"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
)

// chunkState is what the server knows of a chunk beyond its stored data:
// the lease it holds on it and the serial numbers of its mutations.
type chunkState struct {
	// order serializes the chunk's mutations: a primary holds it while it
	// assigns a serial number and every replica applies the mutation; a
	// secondary while it applies one.
	order sync.Mutex
	// reserved is the room reserved for records about to be appended
	// (ReserveRequest), by data ID; guarded by order.
	reserved map[chunkfs.DataID]reservation

	mu           sync.Mutex // guards the fields below
	leaseVersion chunkfs.Version
	leaseUntil   time.Time       // zero when this server is not primary
	serialOf     chunkfs.Version // version the serial counts belong to
	serial       uint64          // primary: last assigned; secondary: last applied
	mutated      bool            // mutated as primary since the last heartbeat
	noSpaceAt    time.Time       // when the last mutation applied here failed for want of space; zero if it did not
}

// state returns chunk h's state, creating it on first use.
func (s *Server) state(h chunkfs.Handle) *chunkState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.chunks[h]
	if st == nil {
		st = &chunkState{}
		s.chunks[h] = st
	}
	return st
}

// dropState forgets chunk h.
func (s *Server) dropState(h chunkfs.Handle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.chunks, h)
}

// grant records a lease until the given time (zero: not primary) at v.
func (st *chunkState) grant(v chunkfs.Version, until time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.leaseVersion, st.leaseUntil = v, until
	st.resetSerialLocked(v)
}

func (st *chunkState) resetSerialLocked(v chunkfs.Version) {
	if st.serialOf != v {
		st.serialOf, st.serial = v, 0
	}
}

// primaryFor fails with KindNotPrimary unless this server holds a valid
// lease on the chunk at version v.
func (st *chunkState) primaryFor(h chunkfs.Handle, v chunkfs.Version, now time.Time) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.leaseUntil.IsZero() || !now.Before(st.leaseUntil) || st.leaseVersion != v {
		return chunkfs.E("mutate", chunkName(h), chunkfs.KindNotPrimary, "no valid lease for this version")
	}
	return nil
}

// nextSerial assigns the next serial number (primary).
func (st *chunkState) nextSerial(v chunkfs.Version) uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.resetSerialLocked(v)
	st.serial++
	return st.serial
}

// noteMutated notes a mutation every replica applied, so that the next
// heartbeat asks to extend the lease. A mutation that failed does not: a
// primary whose chain is broken (a secondary lost its replica) lets its
// lease end, and the master's next grant finds the replicas that still
// hold the chunk, instead of extending a lease no write succeeds under.
func (st *chunkState) noteMutated() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.mutated = true
}

// noSpaceFor is how long a mutation that failed here for want of space
// is told of (outOfSpace): the master's probe follows the writer's
// failure within seconds, and a failure older than that is no news of
// the disk as it is.
const noSpaceFor = time.Minute

// noteNoSpace records when the last mutation applied here failed for want
// of space: at, or zero when it did not.
func (st *chunkState) noteNoSpace(at time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.noSpaceAt = at
}

// outOfSpace reports whether the last mutation applied here failed for
// want of space within noSpaceFor of now.
func (st *chunkState) outOfSpace(now time.Time) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.noSpaceAt.IsZero() && now.Sub(st.noSpaceAt) < noSpaceFor
}

// acceptSerial checks that serial follows the last applied one (secondary).
func (st *chunkState) acceptSerial(h chunkfs.Handle, v chunkfs.Version, serial uint64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.resetSerialLocked(v)
	if serial <= st.serial {
		return chunkfs.E("apply", chunkName(h), chunkfs.KindInvalid, fmt.Sprintf("serial %d after %d: out of order", serial, st.serial))
	}
	return nil
}

// applied records the last applied serial (secondary).
func (st *chunkState) applied(serial uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.serial = max(st.serial, serial)
}

// lease returns whether this server is primary at now, and until when.
func (st *chunkState) lease(now time.Time) (bool, time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.leaseUntil.IsZero() && now.Before(st.leaseUntil), st.leaseUntil
}

// held returns the version and time left of the lease this server holds
// as primary at now; ok is false when it holds none.
func (st *chunkState) held(now time.Time) (v chunkfs.Version, left time.Duration, ok bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.leaseUntil.IsZero() || !now.Before(st.leaseUntil) {
		return 0, 0, false
	}
	return st.leaseVersion, st.leaseUntil.Sub(now), true
}

// heldLease is a lease this server holds as primary, with the time Left
// of it by this server's clock.
type heldLease struct {
	Handle  chunkfs.Handle
	Version chunkfs.Version
	Left    time.Duration
}

// heldLeases lists the leases this server holds as primary at now, with
// the time left of each by its own clock, for the masters: a newly elected
// one adopts those it can confirm instead of waiting them out.
func (s *Server) heldLeases(now time.Time) []heldLease {
	s.mu.Lock()
	states := make(map[chunkfs.Handle]*chunkState, len(s.chunks))
	for h, st := range s.chunks {
		states[h] = st
	}
	s.mu.Unlock()
	var out []heldLease
	for h, st := range states {
		if v, left, ok := st.held(now); ok {
			out = append(out, heldLease{Handle: h, Version: v, Left: left})
		}
	}
	return out
}

// takeMutated reports and clears whether the chunk was mutated as primary
// under a still valid lease since the last call.
func (st *chunkState) takeMutated(now time.Time) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	m := st.mutated && !st.leaseUntil.IsZero() && now.Before(st.leaseUntil)
	st.mutated = false
	return m
}

// extend moves a valid lease's end to until.
func (st *chunkState) extend(now, until time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.leaseUntil.IsZero() && now.Before(st.leaseUntil) && until.After(st.leaseUntil) {
		st.leaseUntil = until
	}
}

// A reservation is room in a chunk for one record whose data is being
// pushed; the record's Append uses it up.
type reservation struct {
	length  int64
	version chunkfs.Version
	until   time.Time // it lapses then, if its Append never comes
}

// Reservations last reserveTTL: an unused one (its client failed between
// reserving and appending) only keeps its room from the others until then.
// A chunk holds at most maxReservations, so that reserving tiny records
// cannot grow a primary's memory without bound; one more is refused as if
// the chunk were full.
const (
	reserveTTL      = 2 * time.Minute
	maxReservations = 4096
)

// reservedLocked returns the room reserved in the chunk at version v by
// records other than id, dropping the reservations that lapsed or belong
// to another version. st.order must be held.
func (st *chunkState) reservedLocked(v chunkfs.Version, id chunkfs.DataID, now time.Time) int64 {
	var sum int64
	for k, r := range st.reserved {
		switch {
		case r.version != v || !now.Before(r.until):
			delete(st.reserved, k)
		case k != id:
			sum += r.length
		}
	}
	return sum
}

// reserveLocked reserves length bytes for record id at version v.
// st.order must be held.
func (st *chunkState) reserveLocked(v chunkfs.Version, id chunkfs.DataID, length int64, now time.Time) {
	if st.reserved == nil {
		st.reserved = make(map[chunkfs.DataID]reservation)
	}
	st.reserved[id] = reservation{length: length, version: v, until: now.Add(reserveTTL)}
}

func chunkName(h chunkfs.Handle) string { return fmt.Sprintf("chunk %016x", uint64(h)) }
