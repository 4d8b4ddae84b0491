package master

import (
	"slices"
	"time"

	"github.com/chunkfs/chunkfs"
)

// Snapshots (GFS §3.4). Before a snapshot is logged, no lease may be out
// on a chunk of its source: a primary could otherwise keep applying
// writes to a chunk the snapshot shares, changing the snapshot after it
// was taken. The registry decides, per chunk, whether the lease on record
// is revoked (its primary is alive at the logged version: every replica
// is told the next version with no lease, which fences the old primary
// off, since secondaries apply only at their own version) or must be
// waited out (its primary is gone, or the lease was given by a previous
// master and cannot be confirmed). The master makes the calls and logs.

// snapshotPlan is the registry's answer for the chunks of a snapshot's
// source.
type snapshotPlan struct {
	revoke []chunkfs.Handle // chunks whose lease is revoked before the snapshot is logged
	wait   time.Time        // when set: a lease may be held until then and cannot be revoked; retry after
}

// leaseCandidates returns, without duplicates, the chunks among handles
// that may carry a lease at now: one on record not yet expired, or one
// below floor while the hold lasts. It is the cheap first pass over a big
// snapshot's chunks, under the registry lock alone.
func (r *registry) leaseCandidates(handles []chunkfs.Handle, pause time.Time, floor chunkfs.Handle, now time.Time) []chunkfs.Handle {
	var out []chunkfs.Handle
	for _, h := range handles {
		if r.leased(h, now) || (h < floor && now.Before(pause)) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// snapshotLeases decides what to do with the leases on handles (each once, at
// its logged version, version) at now. pause and floor are the hold of
// a master that restarted or took over: a chunk below floor may carry a
// lease its predecessor gave until pause, unless a report of it is
// adopted (then it is revoked like any other).
func (r *registry) snapshotLeases(handles []chunkfs.Handle, version versionOf, pause time.Time, floor chunkfs.Handle, now time.Time) snapshotPlan {
	var p snapshotPlan
	for _, h := range handles {
		cur, ok := version(h)
		if !ok {
			continue
		}
		if h < floor && now.Before(pause) && !r.adopt(h, cur, now) {
			p.wait = later(p.wait, pause)
			continue
		}
		if !r.leased(h, now) {
			continue
		}
		if primary, _ := r.lease(h, now); primary != nil && primary.chunks.at(h) == cur {
			p.revoke = append(p.revoke, h)
			continue
		}
		p.wait = later(p.wait, r.timeOf(r.leases[h].expiry))
	}
	return p
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// beginCopy notes that chunk h is being made at version v as the
// copy-on-write copy of a shared chunk: until endCopy, reports of it are
// not garbage, though the log does not name it yet.
func (r *registry) beginCopy(h chunkfs.Handle, v chunkfs.Version) {
	if r.copies == nil {
		r.copies = make(map[chunkfs.Handle]chunkfs.Version)
	}
	r.copies[h] = v
	r.noteTold(h, v)
	r.busy[h]++
}

// endCopy undoes beginCopy, once the copy is logged or abandoned.
func (r *registry) endCopy(h chunkfs.Handle) {
	delete(r.copies, h)
	r.endCalls(h)
}

// withCopies is version that also knows the copies in the making.
func (r *registry) withCopies(version versionOf) versionOf {
	if len(r.copies) == 0 {
		return version
	}
	return func(h chunkfs.Handle) (chunkfs.Version, bool) {
		if v, ok := r.copies[h]; ok {
			return v, true
		}
		return version(h)
	}
}
