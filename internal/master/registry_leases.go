package master

import (
	"slices"
	"time"

	"github.com/chunkfs/chunkfs"
)

// leaseVerdict is what the registry tells a writer's lease request to do.
type leaseVerdict int

const (
	leaseValid leaseVerdict = iota // the primary's lease is valid at the current version: use it
	leaseWait                      // a lease given to an unreachable or stale primary may still be held: retry later
	leaseGrant                     // grant a new lease, at a new version, to the replicas listed
	leaseNone                      // no live replica at the current version
)

// leaseDecision is the registry's answer to grantable.
type leaseDecision struct {
	verdict  leaseVerdict
	replicas []*server // for leaseGrant: the replicas to tell, the primary-to-be first
	fenced   bool      // for leaseGrant: the grant moves the survivors of a shrunk replica set on
}

// grantable decides what a writer of chunk h, at logged version cur, gets
// at now. A valid lease is used as it is unless the chunk is fenced (its
// replica set shrank under the lease): then the survivors, the same primary
// first, get the next version before any further write, so that a replica
// that missed a mutation is stale by version when it comes back. A lease
// held by a primary the master cannot use is waited out.
func (r *registry) grantable(h chunkfs.Handle, cur chunkfs.Version, now time.Time) leaseDecision {
	ci := r.chunks.get(h)
	primary, _ := r.lease(h, now)
	valid := primary != nil && primary.chunks.at(h) == cur
	replicas := r.replicas(h, cur)
	switch {
	case valid && !ci.fence():
		return leaseDecision{verdict: leaseValid}
	case valid:
		return leaseDecision{verdict: leaseGrant, replicas: r.grantOrder(replicas, primary), fenced: true}
	case r.leased(h, now):
		return leaseDecision{verdict: leaseWait}
	case len(replicas) == 0:
		return leaseDecision{verdict: leaseNone}
	}
	return leaseDecision{verdict: leaseGrant, replicas: r.grantOrder(replicas, nil)}
}

// grantOrder orders the replicas of a grant: first, primary when given,
// then those with space free before full ones (a full primary fails
// every append), then the least loaded (the first is named primary).
func (r *registry) grantOrder(replicas []*server, primary *server) []*server {
	order := slices.Clone(replicas)
	slices.SortStableFunc(order, func(a, b *server) int {
		switch {
		case a == primary:
			return -1
		case b == primary:
			return 1
		case a.free <= 0 && b.free > 0:
			return 1
		case b.free <= 0 && a.free > 0:
			return -1
		}
		return int(a.load) - int(b.load)
	})
	return order
}

// nextVersion returns a version above cur and above every version ever
// told for h, so that no two grants share one.
func (r *registry) nextVersion(h chunkfs.Handle, cur chunkfs.Version) chunkfs.Version {
	if ci := r.chunks.get(h); ci != nil {
		cur = max(cur, r.toldOf(h, ci))
	}
	return cur + 1
}

// noteTold records that version v of h has been sent to chunkservers.
func (r *registry) noteTold(h chunkfs.Handle, v chunkfs.Version) {
	ci := r.info(h)
	r.setTold(h, ci, max(r.toldOf(h, ci), v))
}

// beginCalls notes that calls telling h's replicas a new version (a grant
// or a cut) are in flight, at version v; until endCalls, the chunk's
// replica set is in motion and re-replication leaves it alone (a clone
// planned now could target a server the grant is creating it on).
func (r *registry) beginCalls(h chunkfs.Handle, v chunkfs.Version) {
	r.noteTold(h, v)
	r.busy[h]++
}

// endCalls undoes beginCalls.
func (r *registry) endCalls(h chunkfs.Handle) {
	if ci := r.chunks.get(h); ci != nil {
		if r.busy[h]--; r.busy[h] == 0 {
			delete(r.busy, h)
		}
		r.gc(h, ci)
	}
}

// recordTaken records the replicas whose calls succeeded at version v.
func (r *registry) recordTaken(h chunkfs.Handle, v chunkfs.Version, order []*server, errs []error) {
	for i, s := range order {
		if errs[i] == nil {
			r.addReplica(s, h, v)
			r.clearDoubt(s, h)
			r.back(s, h)
		}
	}
}

// forgetFailed drops the replicas whose calls failed, in doubt: the call
// may have reached them after all (see doubt).
//
// A server that failed for want of space is full until its next
// heartbeat says otherwise: no further replica is placed on it meanwhile.
func (r *registry) forgetFailed(h chunkfs.Handle, order []*server, errs []error, now time.Time) {
	for i, s := range order {
		if errs[i] != nil {
			r.doubt(s, h, now)
			if chunkfs.KindOf(errs[i]) == chunkfs.KindNoSpace {
				r.full(s)
			}
		}
	}
}

// missed notes, after a grant at v, that the replicas whose calls failed
// left the counted set under the new lease (leave): a call whose answer
// was lost may have raised one to v, and the writes acknowledged at v go
// through the others' chains alone, so it is never counted at v. It
// returns the IDs of the servers held back whose fact the log does not
// hold yet (Master.logHeldBack).
func (r *registry) missed(h chunkfs.Handle, v chunkfs.Version, order []*server, errs []error) []string {
	var ids []string
	for i, s := range order {
		if errs[i] != nil && r.leave(s, h, v) {
			ids = append(ids, s.id)
		}
	}
	return ids
}

// full notes that s ran out of space: no replica is placed or cloned
// on it until a heartbeat reports room again.
func (r *registry) full(s *server) { s.free = 0 }

// recordLease notes, at now, that primary holds h's lease until expiry;
// the grant that gave it moved every replica it counts to one version, so
// the chunk is no longer fenced. The leases ended by now are forgotten
// whenever the records have doubled since the last time (pruneLeases):
// a master that plans no repairs (in safe mode, or following) keeps at
// most twice the leases that may be held, not one for every chunk ever
// written.
func (r *registry) recordLease(h chunkfs.Handle, primary *server, expiry, now time.Time) {
	r.info(h).setFence(false)
	r.leases[h] = leaseRecord{primary: primary, expiry: r.stampOf(expiry)}
	if len(r.leases) >= max(2*r.leasesKept, minLeasePrune) {
		r.pruneLeases(now)
	}
}

// minLeasePrune is how many lease records recordLease lets build up
// before it prunes them at all.
const minLeasePrune = 1024

// revoke forgets h's lease (a truncation's new version ends it).
func (r *registry) revoke(h chunkfs.Handle) {
	if ci := r.chunks.get(h); ci != nil {
		delete(r.leases, h)
		ci.setFence(false)
	}
}

// extend extends the valid leases s holds among handles to now+d and
// returns those extended. A fenced lease is not extended: the next write
// replaces it anyway, and letting it end lets re-replication start.
func (r *registry) extend(s *server, handles []chunkfs.Handle, now time.Time, d time.Duration) []chunkfs.Handle {
	var out []chunkfs.Handle
	for _, h := range handles {
		ci, l := r.chunks.get(h), r.leases[h]
		if ci != nil && l.primary == s && r.leased(h, now) && !ci.fence() {
			r.leases[h] = leaseRecord{primary: s, expiry: r.stampOf(now.Add(d))}
			out = append(out, h)
		}
	}
	return out
}

// leaseOutstanding reports whether a lease on h might still be held, by a
// live server or not.
func (r *registry) leaseOutstanding(h chunkfs.Handle, now time.Time) bool {
	return r.leased(h, now)
}

// primaryAt returns h's recorded primary (live or not) while its lease may
// be held at now and its address is addr; nil otherwise.
func (r *registry) primaryAt(h chunkfs.Handle, addr string, now time.Time) *server {
	if !r.leased(h, now) || r.leases[h].primary.addr != addr {
		return nil
	}
	return r.leases[h].primary
}

// dropPrimary forgets h's lease and, in doubt, its replica on primary,
// after a writer reported the primary unreachable and the master's probe
// confirmed it. The next grant goes to the other replicas at a new version;
// a primary that is alive after all cannot complete a write at the old
// version any more, since every secondary applies only at its own version.
func (r *registry) dropPrimary(h chunkfs.Handle, primary *server, now time.Time) {
	ci := r.chunks.get(h)
	if ci == nil || r.leases[h].primary != primary {
		return
	}
	delete(r.leases, h)
	ci.setFence(false)
	if primary.chunks.has(h) {
		r.doubt(primary, h, now)
	}
}

// replicaAt returns the server at addr when it holds a live replica of h
// at v; nil otherwise.
func (r *registry) replicaAt(h chunkfs.Handle, v chunkfs.Version, addr string) *server {
	s := r.byAddr[addr]
	if s == nil || !slices.Contains(r.replicas(h, v), s) {
		return nil
	}
	return s
}

// dropSecondary takes s's replica of h out of the replicas counted at v,
// in doubt, after a writer's attempt failed there and s did not answer
// the master's probe at v, when at least need other replicas stay
// counted. With a lease out that fences the chunk (dropReplica): the next
// grant goes to the others at a new version. It reports whether s's
// replica was taken out.
func (r *registry) dropSecondary(h chunkfs.Handle, v chunkfs.Version, s *server, need int, now time.Time) bool {
	live := r.replicas(h, v)
	if len(live)-1 < need || !slices.Contains(live, s) {
		return false
	}
	r.doubt(s, h, now)
	return true
}

// dropFull notes that s ran out of space under a write of h: its
// replica's last mutation failed for want of it, and every further one
// that grows the chunk would too. s is full (no replica is placed or
// cloned on it until a heartbeat reports room), and its replica leaves
// those counted at v, in doubt, when at least need others stay counted:
// the lease moves to the others at a new version (with s's lease, when s
// is the primary, dropped at once) and the chunk is healed on a server
// with room. Below that, the replica stays and writes fail for want of
// space. It reports whether s's replica was taken out.
func (r *registry) dropFull(h chunkfs.Handle, v chunkfs.Version, s *server, need int, now time.Time) bool {
	r.full(s)
	if r.chunks.get(h) == nil || r.leases[h].primary != s {
		return r.dropSecondary(h, v, s, need, now)
	}
	live := r.replicas(h, v)
	if len(live)-1 < need || !slices.Contains(live, s) {
		return false
	}
	r.dropPrimary(h, s, now)
	return true
}

// Lease adoption. A new leader does not know which leases its predecessor
// granted, only that all of them end by the logged horizon (the hold). The
// chunkservers report the leases they hold as primary, with the time left
// by their own clock, in every registration and heartbeat to every master;
// each master records the latest report of each server. A leader adopts a
// reported lease on a chunk the hold covers when it can confirm it (adopt),
// and from then on treats it as one it granted: writers are sent to that
// primary and its extensions are answered. A chunk whose primary it cannot
// confirm waits for the hold to end as before.

// leaseLeft is a lease a server reported holding as primary, as kept
// for each chunk: the report's time is kept once for all (server.heldAt).
type leaseLeft struct {
	version chunkfs.Version
	left    time.Duration // time left when the master received the report, by the server's clock
}

// heldLease is a lease a server reported holding as primary.
type heldLease struct {
	version chunkfs.Version
	at      time.Time     // when the master received the report, by its clock
	left    time.Duration // time left then, by the server's clock
}

// heldReport is one lease in a report: a chunk, its version, time left.
type heldReport struct {
	handle  chunkfs.Handle
	version chunkfs.Version
	left    time.Duration
}

// adoptRule says which reported leases a leader may adopt and how far it
// trusts the reports' figures.
type adoptRule struct {
	on    bool
	until time.Time      // the previous leader's leases may be held until then (the hold)
	floor chunkfs.Handle // on chunks below this handle
	age   time.Duration  // bound on a report's age when received: built, sent and queued
	rate  float64        // bound on how much faster or slower a server's clock runs than the master's
}

// Default adoption margins: a report is trusted to be at most this old
// when received, and clocks to run within this rate of each other.
const (
	defaultAdoptAge  = time.Second
	defaultAdoptRate = 0.01
)

// setHold records that the previous leader's leases on chunks below floor
// may be held until until; reports of them may be adopted meanwhile.
func (r *registry) setHold(until time.Time, floor chunkfs.Handle) {
	r.adoption.until, r.adoption.floor = until, floor
}

// recordHeld replaces what s last reported holding by leases, received at now.
func (r *registry) recordHeld(s *server, leases []heldReport, now time.Time) {
	if len(leases) == 0 {
		s.held, s.heldAt = nil, time.Time{}
		return
	}
	s.held, s.heldAt = make(map[chunkfs.Handle]leaseLeft, len(leases)), now
	for _, l := range leases {
		s.held[l.handle] = leaseLeft{version: l.version, left: max(l.left, 0)}
	}
}

// reported returns the lease s last reported holding on h, if any.
func (s *server) reported(h chunkfs.Handle) (heldLease, bool) {
	l, ok := s.held[h]
	return heldLease{version: l.version, at: s.heldAt, left: l.left}, ok
}

// sureUntil is when the lease reported in l surely still holds: the report
// may be age old, and the server's clock may run fast.
func (a adoptRule) sureUntil(l heldLease) time.Time {
	return l.at.Add(-a.age).Add(time.Duration(float64(l.left) * (1 - a.rate)))
}

// endsBy is when the lease reported in l has surely ended: the report was
// built before it was received, and the server's clock may run slow.
func (a adoptRule) endsBy(l heldLease) time.Time {
	return l.at.Add(time.Duration(float64(l.left) * (1 + a.rate)))
}

// adopt decides whether the leader, at now, takes the lease reported on
// chunk h (logged at version cur) as its own, and records it if so. It
// adopts only while the hold covers h, and only when exactly one server
// reports a lease on h that may still be held; that server is alive and
// counted as holding h at cur, reports the lease at cur and it surely
// holds at now; no replica of h is ahead of the log and no version above
// cur was told (a grant that was never logged may be out); and no other
// lease on h is on record. The lease is recorded until it has surely
// ended by the report, but no later than the hold, and fenced: it is not
// extended, and a writer asking for it gets a new grant to the same
// primary at a new version. It reports whether h has a lease on record
// at cur from that server, adopted now or before.
func (r *registry) adopt(h chunkfs.Handle, cur chunkfs.Version, now time.Time) bool {
	a := r.adoption
	ci := r.chunks.get(h)
	if !a.on || h >= a.floor || !now.Before(a.until) || ci == nil {
		return false
	}
	if p, _ := r.lease(h, now); p != nil {
		return p.chunks.at(h) == cur
	}
	if r.leased(h, now) || r.toldOf(h, ci) > cur || ci.fence() {
		return false
	}
	s, l := r.soleReporter(h, now)
	if s == nil || !s.alive || l.version != cur || s.chunks.at(h) != cur || !now.Before(a.sureUntil(l)) {
		return false
	}
	for x := range r.holders(h, ci) {
		if x.chunks.at(h) > cur {
			return false
		}
	}
	end := a.endsBy(l)
	if end.After(a.until) {
		end = a.until
	}
	r.leases[h] = leaseRecord{primary: s, expiry: r.stampOf(end)}
	// The lease's secondaries are not known: a replica that took its
	// writes may not have registered yet, and handing the lease out with
	// the replicas counted now would let writes at cur skip it while it
	// keeps cur. It is fenced: the primary finishes what it has in
	// flight, and the next writer's PrepareWrite grants again, at a new
	// version, to the replicas counted then.
	ci.setFence(true)
	return true
}

// soleReporter returns the one server whose report of a lease on h may
// still hold at now; nil when none or more than one.
func (r *registry) soleReporter(h chunkfs.Handle, now time.Time) (*server, heldLease) {
	var one *server
	var lease heldLease
	for _, s := range r.servers {
		l, ok := s.reported(h)
		if !ok || !now.Before(r.adoption.endsBy(l)) {
			continue
		}
		if one != nil {
			return nil, heldLease{}
		}
		one, lease = s, l
	}
	return one, lease
}

// adoptFrom adopts, where it can, the leases server id last reported, and
// returns the chunks whose lease it adopted now.
func (r *registry) adoptFrom(id string, version versionOf, now time.Time) []chunkfs.Handle {
	s := r.servers[id]
	if s == nil || !r.adoption.on || !now.Before(r.adoption.until) {
		return nil
	}
	var out []chunkfs.Handle
	for h := range s.held {
		if p, _ := r.lease(h, now); p != nil {
			continue // on record already
		}
		if cur, ok := version(h); ok && r.adopt(h, cur, now) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// adoptAll adopts what every server last reported (a new leader, once it
// has caught up) and returns the chunks whose lease it adopted.
func (r *registry) adoptAll(version versionOf, now time.Time) []chunkfs.Handle {
	var out []chunkfs.Handle
	for _, s := range r.sorted() {
		out = append(out, r.adoptFrom(s.id, version, now)...)
	}
	slices.Sort(out)
	return out
}
