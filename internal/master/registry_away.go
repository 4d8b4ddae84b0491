package master

import (
	"slices"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// Held-back replicas. A replica that leaves a chunk's counted set while a
// lease is out (or whose grant answer was lost) is held back: it is not
// counted at the version it held again. The master logs the fact
// (namespace.OpHoldBack) before it hands out a chain that leaves the
// replica out (Master.logHeldBack), so that every master, and one taking
// over, holds it back too (holdLogged); until it is logged, no chain at
// that version is handed out (unlogged). A fact is kept by server ID,
// which a chunkserver keeps across restarts.

// awayReplica is a replica that left its chunk's counted set while a
// lease was out, and the version it held then (leave).
type awayReplica struct {
	id     string          // its server's ID
	v      chunkfs.Version // not counted at v or below
	logged bool            // the log holds the fact at v
}

// leave notes that s's replica of h, at v, left the counted set while a
// lease was out. The chains handed out since leave it out, so writes
// acknowledged through them may be missing from it at the same version:
// it is not counted at v again (heldBack), nor deleted, until a grant or
// clone makes it current or the counted replicas move on and leave it
// stale. The last replica at v to leave is not held back: it was in every
// chain, so every acknowledged write reached it. It reports whether s's
// replica is held back at v now and the log may not know it yet.
func (r *registry) leave(s *server, h chunkfs.Handle, v chunkfs.Version) bool {
	if v == 0 || len(r.replicas(h, v)) == 0 {
		return false
	}
	return r.holdAway(s.id, h, v, false)
}

// holdAway holds server id's replica of h back at v, logged or not; it
// reports whether the fact at v is not logged.
func (r *registry) holdAway(id string, h chunkfs.Handle, v chunkfs.Version, logged bool) bool {
	if r.away == nil {
		r.away = make(map[chunkfs.Handle][]awayReplica)
	}
	list := r.away[h]
	i := slices.IndexFunc(list, func(a awayReplica) bool { return a.id == id })
	switch {
	case i < 0:
		r.away[h] = append(list, awayReplica{id: id, v: v, logged: logged})
	case v > list[i].v:
		list[i] = awayReplica{id: id, v: v, logged: logged}
	case v == list[i].v:
		list[i].logged = list[i].logged || logged
	}
	i = slices.IndexFunc(r.away[h], func(a awayReplica) bool { return a.id == id })
	return !r.away[h][i].logged
}

// heldBack reports whether s's replica of h at v is not to be counted:
// s left h's counted set under a lease at v or a later version.
func (r *registry) heldBack(s *server, h chunkfs.Handle, v chunkfs.Version) bool {
	for _, a := range r.away[h] {
		if a.id == s.id && v <= a.v {
			return true
		}
	}
	return false
}

// unlogged reports whether a replica of h is held back at v or above and
// the log does not know it yet: no chain of h at v may be handed out.
func (r *registry) unlogged(h chunkfs.Handle, v chunkfs.Version) bool {
	return slices.ContainsFunc(r.away[h], func(a awayReplica) bool { return a.v >= v && !a.logged })
}

// loggedAway notes that the log holds server id's replica of h back at v.
func (r *registry) loggedAway(id string, h chunkfs.Handle, v chunkfs.Version) {
	for i, a := range r.away[h] {
		if a.id == id && a.v == v {
			r.away[h][i].logged = true
		}
	}
}

// fenceAway fences h after a hold-back could not be logged: its next
// writer gets a new version, past the replica's (grantable).
func (r *registry) fenceAway(h chunkfs.Handle) {
	if ci := r.chunks.get(h); ci != nil {
		ci.setFence(true)
	}
}

// holdLogged takes the held-back replicas the log holds (chunks): each is
// held back, and a replica counted at or below its fact's version leaves
// the counted set, uncondemned. A master that learnt locations while it
// followed (registration, learn) counted them; a new leader calls it
// before it leads. Facts no longer logged whose chunk is gone or moved past
// them are forgotten: they are stale by version.
func (r *registry) holdLogged(chunks []namespace.HeldBackChunk, version versionOf, now time.Time) {
	for h, list := range r.away {
		cur, ok := version(h)
		if list = slices.DeleteFunc(list, func(a awayReplica) bool { return !ok || a.v < cur }); len(list) > 0 {
			r.away[h] = list
		} else {
			r.movedOn(h)
		}
	}
	for _, c := range chunks {
		for _, b := range c.Replicas {
			r.holdAway(b.Server, c.Handle, b.Version, true)
			if s := r.servers[b.Server]; s != nil && s.chunks.has(c.Handle) && s.chunks.at(c.Handle) <= b.Version {
				r.dropReplica(s, c.Handle, now)
			}
		}
	}
}

// back forgets that s's replica of h left the counted set: a call made it
// current since (a grant, a clone), or it is stale and deleted.
func (r *registry) back(s *server, h chunkfs.Handle) {
	list := r.away[h]
	for i, a := range list {
		if a.id == s.id {
			list = slices.Delete(list, i, i+1)
			break
		}
	}
	if len(list) == 0 {
		delete(r.away, h)
	} else {
		r.away[h] = list
	}
}

// leftBehind reports whether h, at logged version v, has replicas held
// back at v (leave) and no lease out or grant in flight, while some
// replica at v counts: moving the counted ones to the next version leaves
// the held-back ones stale, to be deleted, and their servers free to take
// a clone. Without it they would be kept, uncounted, until the chunk's
// next write. Those held back below v are forgotten: the log moved past
// them, so they are stale by their version.
func (r *registry) leftBehind(h chunkfs.Handle, v chunkfs.Version, now time.Time) bool {
	if r.away[h] == nil {
		return false
	}
	if list := slices.DeleteFunc(r.away[h], func(a awayReplica) bool { return a.v < v }); len(list) > 0 {
		r.away[h] = list
	} else {
		r.movedOn(h)
		return false
	}
	return r.busy[h] == 0 && !r.leaseOutstanding(h, now) && len(r.replicas(h, v)) > 0
}

// movedOn notes that h's counted replicas moved to a logged version past
// every replica held back: those are stale by their version now.
func (r *registry) movedOn(h chunkfs.Handle) {
	delete(r.away, h)
	if ci := r.chunks.get(h); ci != nil {
		r.gc(h, ci)
	}
}

// forgetAway forgets every replica of s held back (leave), s being
// replaced by another server: none of them can come back.
func (r *registry) forgetAway(s *server) {
	for h, list := range r.away {
		if slices.ContainsFunc(list, func(a awayReplica) bool { return a.id == s.id }) {
			r.back(s, h)
			if ci := r.chunks.get(h); ci != nil {
				r.gc(h, ci)
			}
		}
	}
}
