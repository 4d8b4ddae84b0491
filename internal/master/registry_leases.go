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
	ci := r.chunks[h]
	primary, _ := r.lease(h, now)
	valid := primary != nil && primary.chunks[h] == cur
	replicas := r.replicas(h, cur)
	switch {
	case valid && !ci.fence:
		return leaseDecision{verdict: leaseValid}
	case valid:
		return leaseDecision{verdict: leaseGrant, replicas: r.grantOrder(replicas, primary), fenced: true}
	case ci != nil && ci.primary != nil && now.Before(ci.expiry):
		return leaseDecision{verdict: leaseWait}
	case len(replicas) == 0:
		return leaseDecision{verdict: leaseNone}
	}
	return leaseDecision{verdict: leaseGrant, replicas: r.grantOrder(replicas, nil)}
}

// grantOrder orders the replicas of a grant: first, primary when given,
// then the least loaded (the first is named primary).
func (r *registry) grantOrder(replicas []*server, primary *server) []*server {
	order := slices.Clone(replicas)
	slices.SortStableFunc(order, func(a, b *server) int {
		switch {
		case a == primary:
			return -1
		case b == primary:
			return 1
		}
		return int(a.load) - int(b.load)
	})
	return order
}

// nextVersion returns a version above cur and above every version ever
// told for h, so that no two grants share one.
func (r *registry) nextVersion(h chunkfs.Handle, cur chunkfs.Version) chunkfs.Version {
	if ci := r.chunks[h]; ci != nil {
		cur = max(cur, ci.told)
	}
	return cur + 1
}

// noteTold records that version v of h has been sent to chunkservers.
func (r *registry) noteTold(h chunkfs.Handle, v chunkfs.Version) {
	ci := r.info(h)
	ci.told = max(ci.told, v)
}

// beginCalls notes that calls telling h's replicas a new version (a grant
// or a cut) are in flight, at version v; until endCalls, the chunk's
// replica set is in motion and re-replication leaves it alone (a clone
// planned now could target a server the grant is creating it on).
func (r *registry) beginCalls(h chunkfs.Handle, v chunkfs.Version) {
	r.noteTold(h, v)
	r.chunks[h].busy++
}

// endCalls undoes beginCalls.
func (r *registry) endCalls(h chunkfs.Handle) {
	if ci := r.chunks[h]; ci != nil {
		ci.busy--
		r.gc(h, ci)
	}
}

// recordTaken records the replicas whose calls succeeded at version v.
func (r *registry) recordTaken(h chunkfs.Handle, v chunkfs.Version, order []*server, errs []error) {
	for i, s := range order {
		if errs[i] == nil {
			r.addReplica(s, h, v)
			r.clearDoubt(s, h)
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
				s.free = 0
			}
		}
	}
}

// recordLease notes that primary holds h's lease until expiry; the grant
// that gave it moved every replica it counts to one version, so the chunk
// is no longer fenced.
func (r *registry) recordLease(h chunkfs.Handle, primary *server, expiry time.Time) {
	ci := r.info(h)
	ci.primary, ci.expiry, ci.fence = primary, expiry, false
}

// revoke forgets h's lease (a truncation's new version ends it).
func (r *registry) revoke(h chunkfs.Handle) {
	if ci := r.chunks[h]; ci != nil {
		ci.primary, ci.fence = nil, false
	}
}

// extend extends the valid leases s holds among handles to now+d and
// returns those extended. A fenced lease is not extended: the next write
// replaces it anyway, and letting it end lets re-replication start.
func (r *registry) extend(s *server, handles []chunkfs.Handle, now time.Time, d time.Duration) []chunkfs.Handle {
	var out []chunkfs.Handle
	for _, h := range handles {
		ci := r.chunks[h]
		if ci != nil && ci.primary == s && now.Before(ci.expiry) && !ci.fence {
			ci.expiry = now.Add(d)
			out = append(out, h)
		}
	}
	return out
}

// leaseOutstanding reports whether a lease on h might still be held, by a
// live server or not.
func (r *registry) leaseOutstanding(h chunkfs.Handle, now time.Time) bool {
	ci := r.chunks[h]
	return ci != nil && ci.primary != nil && now.Before(ci.expiry)
}

// primaryAt returns h's recorded primary (live or not) while its lease may
// be held at now and its address is addr; nil otherwise.
func (r *registry) primaryAt(h chunkfs.Handle, addr string, now time.Time) *server {
	ci := r.chunks[h]
	if ci == nil || ci.primary == nil || ci.primary.addr != addr || !now.Before(ci.expiry) {
		return nil
	}
	return ci.primary
}

// dropPrimary forgets h's lease and, in doubt, its replica on primary,
// after a writer reported the primary unreachable and the master's probe
// confirmed it. The next grant goes to the other replicas at a new version;
// a primary that is alive after all cannot complete a write at the old
// version any more, since every secondary applies only at its own version.
func (r *registry) dropPrimary(h chunkfs.Handle, primary *server, now time.Time) {
	ci := r.chunks[h]
	if ci == nil || ci.primary != primary {
		return
	}
	ci.primary, ci.fence = nil, false
	if _, ok := primary.chunks[h]; ok {
		r.doubt(primary, h, now)
	}
}
