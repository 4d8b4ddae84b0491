package master

import (
	"errors"
	"slices"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/placement"
)

// chunkLookup returns what the namespace says of chunk h: its logged
// version, its file's replication, its length, and whether it exists.
type chunkLookup func(h chunkfs.Handle) (v chunkfs.Version, want int, length int64, dead, ok bool)

// cloneOrder is a clone the master is to start: tell target to copy
// version of handle (length bytes) from source.
type cloneOrder struct {
	handle  chunkfs.Handle
	version chunkfs.Version
	length  int64
	live    int // live replicas when it was planned
	target  *server
	source  *server
	pending *pendingClone
	move    bool // a balancer move: the source is trimmed once the clone is counted
	// The servers' addresses when it was planned (a server's record
	// changes under Master.regMu only).
	targetAddr, sourceAddr string
}

// trimOrder is an excess replica the registry condemned.
type trimOrder struct {
	handle chunkfs.Handle
	server *server
}

// blockedFor is how long a writer's wait keeps a chunk first in the
// repair queue.
const blockedFor = time.Minute

// plan decides the re-replication work to start at now: clones of chunks
// with fewer counted live current replicas than their file's replication
// (a replica on a server being decommissioned does not count), in
// placement.RepairOrder (the fewest counted replicas first; a chunk a
// writer waits on first among equals), at most maxClones in flight per
// server as source and, apart, as target (a clone uses the source's
// outgoing and the target's incoming bandwidth); the trimming of chunks
// with more than their replication (condemned here, deleted at the
// server's next heartbeat); and, when no repair is in flight or waiting
// for a clone slot, the balancer's moves (balance).
//
// Priority is strict: no chunk is cloned while a chunk with fewer live
// replicas waits for a clone slot or is being cloned, so every one-replica
// chunk is healed before any two-replica chunk is touched. A chunk that
// nothing can clone (no source, or no server with room that lacks it)
// holds none back: it would starve every other repair. Nor does, beyond
// the round it starts in, a clone of a chunk whose last clone ran into its
// deadline (stalled: under load, or at a source or target that hangs):
// each try would otherwise hold every chunk with more replicas back for a
// whole deadline. A chunk under a lease is left alone until the lease ends
// (a clone taken while the primary mutates could miss a write; a chunk a
// writer is blocked on gets no lease, so it is not delayed), except one
// down to its last live replica. When that is the primary's, plan lists it
// in r.revoking, the master revokes the lease (as a snapshot does: the
// replica moves to the next version with no lease) and plans again, and
// then it is cloned like any chunk without a lease. When it is a
// secondary's, its primary lost (fenceable), plan lists it in r.fencing
// and the master makes the same calls to that replica: the lost primary
// may still hold its lease, but no write through it can be acknowledged
// any more, since the replica left applies only at its own version. A
// chunk with no live replica is missing: there is nothing to clone from.
//
// It looks at the chunks whose replica set changed since it last found
// them healthy (a chunk's set changes only in this registry), or at every
// chunk when full is set: the master sweeps everything now and then, for
// changes of a file's replication. A chunk found at its full replication
// has no corrupt replica left to replace, whether a clone replaced it or
// its server came back with a good copy (a failed data directory
// restored).
func (r *registry) plan(cfg placement.Config, lookup chunkLookup, maxClones int, now time.Time, full bool) ([]cloneOrder, []trimOrder) {
	return r.planIn(cfg, lookup, maxClones, now, full, nil)
}

// planSlice is how many chunks plan examines between two calls of its
// pause.
const planSlice = 256

// planIn is plan that calls pause, when not nil, after every planSlice
// chunks it examines: the master releases its locks there, so that a
// round over many chunks stalls no heartbeat or metadata call for longer
// than a slice, and pause returns the lookup of the namespace as it is
// once they are taken again. The chunks found short of replicas in
// earlier slices are examined again after the last one, before any clone
// is started, so what it starts is decided on the state it holds then; a
// chunk that changed behind a slice already examined is dirty again and
// is looked at next round.
func (r *registry) planIn(cfg placement.Config, lookup chunkLookup, maxClones int, now time.Time, full bool, pause func() chunkLookup) ([]cloneOrder, []trimOrder) {
	var needs []placement.Repair
	level := int(^uint(0) >> 1) // the fewest live replicas among chunks being cloned or waiting for a slot
	var trims []trimOrder
	r.revoking, r.fencing, r.leaving = r.revoking[:0], r.fencing[:0], r.leaving[:0]
	r.pruneLeases(now)
	examine := func(h chunkfs.Handle, ci *chunkInfo) {
		v, want, _, dead, ok := lookup(h)
		if !ok {
			r.chunks.clean(h)
			return
		}
		all := r.replicas(h, v)
		live := len(r.counted(h, v))
		switch {
		case r.clones[h] != nil && r.clones[h].move:
			r.markDirty(h) // its source is trimmed when it ends
		case r.clones[h] != nil && r.clones[h].stalled:
			// It held the level back in the round it started in.
		case r.clones[h] != nil:
			level = min(level, r.clones[h].live)
		case r.busy[h] == 0 && live == 1 && live < want && r.revocable(h, v, now):
			r.markDirty(h) // cloned once the master revoked the lease
			r.revoking = append(r.revoking, h)
		case r.busy[h] == 0 && live == 1 && live < want && r.fenceable(h, v, now):
			r.markDirty(h) // cloned once the master fenced the lost primary
			r.fencing = append(r.fencing, h)
		case r.leftBehind(h, v, now):
			r.markDirty(h) // looked at again once the master moved it on
			r.leaving = append(r.leaving, h)
		case r.busy[h] > 0 || len(all) == 0 || r.leaseOutstanding(h, now):
			r.markDirty(h) // look again next time
		case live < want:
			r.markDirty(h)
			needs = append(needs, placement.Repair{Handle: uint64(h), Live: live, Want: want, Deleted: dead, Blocked: r.blocked(h, now)})
		case live > want:
			ci.corrupt = 0 // replaced, however: by a clone or a server back with a good copy
			trims = append(trims, r.trim(h, v, want, now)...)
		default:
			ci.corrupt = 0
			delete(r.stalls, h)
			r.chunks.clean(h)
		}
	}
	examined, paused := 0, false
	step := func() {
		if examined++; pause != nil && examined%planSlice == 0 {
			lookup, paused = pause(), true
		}
	}
	if full {
		for h, ci := range r.chunks.all() {
			examine(h, ci)
			step()
		}
	} else {
		for h, ci := range r.chunks.dirtyOnes() {
			examine(h, ci)
			step()
		}
	}
	if paused {
		// The locks were let go: what was short of replicas then is
		// looked at again as it is now. (level may stay below the
		// truth, from a clone that ended meanwhile: a round's wait.)
		found := needs
		needs = nil
		for _, n := range found {
			h := chunkfs.Handle(n.Handle)
			if ci := r.chunks.get(h); ci != nil {
				examine(h, ci)
			}
		}
	}
	placement.RepairOrder(needs)
	var orders []cloneOrder
	waiting := false // a repair waits for a clone slot
	for _, n := range needs {
		if n.Live > level {
			waiting = true
			break
		}
		h := chunkfs.Handle(n.Handle)
		v, _, length, _, _ := lookup(h)
		o, ok, throttled := r.startClone(cfg, h, v, length, n.Live, maxClones, now)
		if ok {
			orders = append(orders, o)
		}
		if ok || throttled {
			// Those with more replicas wait for this one. A chunk
			// nothing can clone (no source, no server with room lacking
			// it) holds none back: it would starve them all.
			level = min(level, n.Live)
		}
		waiting = waiting || throttled
	}
	if len(orders) == 0 && !waiting && r.repairing == 0 {
		orders = append(orders, r.balance(cfg, lookup, maxClones, now)...)
	}
	return orders, trims
}

// revocable reports whether h, at logged version v, is under a lease the
// master can revoke at now: one held by a live primary at v (the rule of
// snapshotLeases).
func (r *registry) revocable(h chunkfs.Handle, v chunkfs.Version, now time.Time) bool {
	primary, _ := r.lease(h, now)
	return primary != nil && primary.chunks.at(h) == v
}

// fenceable reports whether h, at logged version v, is under a lease on
// record whose primary the master lost at now (dead, or no longer counted
// as holding h at v) while a live replica at v is left: moving the
// replicas left to the next version fences the primary off, as its writes
// need every replica of its chain, and the one left is in it. (A replica
// left out of a writer's chain was out of the set when the chain was
// handed out, and the lease's end would not help it either: the grant
// after it goes to the replicas left at v just the same.)
func (r *registry) fenceable(h chunkfs.Handle, v chunkfs.Version, now time.Time) bool {
	ci := r.chunks.get(h)
	return ci != nil && r.leased(h, now) && !r.revocable(h, v, now) && len(r.replicas(h, v)) > 0
}

// blocked reports whether a writer waited on chunk h lately; a wait
// older than that is forgotten.
func (r *registry) blocked(h chunkfs.Handle, now time.Time) bool {
	at, ok := r.blockedAt[h]
	if ok && now.Sub(at) >= blockedFor {
		delete(r.blockedAt, h)
		ok = false
	}
	return ok
}

// block notes that a writer waits on h for want of live replicas.
func (r *registry) block(h chunkfs.Handle, now time.Time) {
	if r.chunks.get(h) == nil {
		return
	}
	if r.blockedAt == nil {
		r.blockedAt = make(map[chunkfs.Handle]time.Time)
	}
	r.blockedAt[h] = now
}

// startClone picks a source among h's live replicas (those on servers
// being decommissioned too: they still serve reads) and a target among the
// other live servers with room that are not being decommissioned, and
// records the clone as in flight. When it cannot, throttled says whether
// only the clone throttle stood in the way.
func (r *registry) startClone(cfg placement.Config, h chunkfs.Handle, v chunkfs.Version, length int64, live, maxClones int, now time.Time) (o cloneOrder, ok, throttled bool) {
	holders := r.replicas(h, v)
	hc := make([]placement.Server, len(holders))
	var racks []string // of the counted replicas: the drained ones will go
	for i, s := range holders {
		hc[i] = candidate(s, now, cfg)
		hc[i].Clones = s.sourcing // a NIC's two directions: sourcing and cloning are bounded apart
		if !r.draining(s) {
			racks = append(racks, s.rack)
		}
	}
	si := placement.CloneSource(hc, maxClones)
	if si < 0 {
		return cloneOrder{}, false, len(holders) > 0
	}
	var others []*server
	for _, s := range r.live() {
		has := s.chunks.has(h)
		_, doubted := s.doubt[h]
		// A server still to be told to delete h could delete the clone;
		// one holding h back (leave) would answer it holds it already.
		if !has && !doubted && !r.draining(s) && !slices.Contains(s.garbage, h) && !r.heldBack(s, h, v) {
			others = append(others, s)
		}
	}
	oc := make([]placement.Server, len(others))
	for i, s := range others {
		oc[i] = candidate(s, now, cfg)
		oc[i].Clones = s.cloning
	}
	ti := placement.CloneTarget(cfg, oc, racks, maxClones, r.rng)
	if ti < 0 {
		return cloneOrder{}, false, placement.CloneTarget(cfg, oc, racks, int(^uint(0)>>1), nil) >= 0
	}
	source, target := holders[si], others[ti]
	_, stalled := r.stalls[h]
	pc := &pendingClone{target: target, source: source, version: v, started: now, live: live, stalled: stalled}
	r.info(h)
	r.setClone(h, pc)
	source.sourcing++
	target.cloning++
	r.repairing++
	return cloneOrder{handle: h, version: v, length: length, live: live, target: target, source: source, pending: pc,
		targetAddr: target.addr, sourceAddr: source.addr}, true, false
}

// setClone records pc as h's clone in flight.
func (r *registry) setClone(h chunkfs.Handle, pc *pendingClone) {
	if r.clones == nil {
		r.clones = make(map[chunkfs.Handle]*pendingClone)
	}
	r.clones[h] = pc
}

// cloning reports whether s is the target of a clone of h in flight (its
// replica is incomplete until the clone answers).
func (r *registry) cloning(h chunkfs.Handle, s *server) bool {
	pc := r.clones[h]
	return pc != nil && pc.target == s
}

// cloneDone records the end of clone pc of h: on success, if the chunk
// still has the version cloned and the target is still the same live
// server, the target's replica counts; otherwise whatever the target
// stored is garbage. cur and exists are the chunk's logged version now.
// The end of a balancer move also trims its source (moveDone): trimmed
// says so.
func (r *registry) cloneDone(h chunkfs.Handle, pc *pendingClone, length int64, err error, cur chunkfs.Version, exists bool, now time.Time) (counted, trimmed bool) {
	counted = r.endClone(h, pc, length, err, cur, exists, now)
	if pc.move {
		return counted, r.moveDone(h, pc, counted, now)
	}
	r.repairing--
	return counted, false
}

// endClone is cloneDone's part common to repairs and moves.
func (r *registry) endClone(h chunkfs.Handle, pc *pendingClone, length int64, err error, cur chunkfs.Version, exists bool, now time.Time) bool {
	pc.source.sourcing--
	pc.target.cloning--
	if ci := r.chunks.get(h); ci != nil && r.clones[h] == pc {
		delete(r.clones, h)
		defer r.gc(h, ci)
	}
	t := pc.target
	if chunkfs.KindOf(err) == chunkfs.KindNotExist {
		r.sourceGone(h, pc, now)
	}
	if errors.Is(err, errStalled) && !pc.move {
		r.stall(h)
	}
	// A target that answers it holds the chunk at the version cloned
	// already (its report had not reached this master, a new leader say)
	// has a good replica: it counts, and it must never be deleted as the
	// leftovers of a failed clone.
	held := chunkfs.KindOf(err) == chunkfs.KindExist
	ok := (err == nil || held && !r.heldBack(t, h, pc.version)) && exists && cur == pc.version && t.alive && r.servers[t.id] == t
	if !ok {
		// What the target stored is garbage, unless it holds a replica of
		// its own that the clone did not touch: one this master counts,
		// or one the target says it holds (at the version or newer), which
		// its reports will tell about.
		has := t.chunks.has(h)
		own := held || chunkfs.KindOf(err) == chunkfs.KindStale
		if !has && !own && r.servers[t.id] == t {
			r.queueGarbage(t, h)
		}
		return false
	}
	r.addReplica(t, h, pc.version)
	r.clearDoubt(t, h)
	r.back(t, h)
	delete(r.stalls, h)
	if pc.move {
		return true
	}
	if ci := r.chunks.get(h); ci != nil && ci.corrupt > 0 {
		ci.corrupt--
	}
	r.repaired++
	r.recent = append(pruneDone(r.recent, now), repairDone{at: now, bytes: length})
	return true
}

// errStalled marks the error of a clone that ran into its deadline.
var errStalled = errors.New("the clone ran into its deadline")

// stall notes that h's clone ran into its deadline: its next clone holds
// the chunks with more replicas back only in the round it starts (plan).
func (r *registry) stall(h chunkfs.Handle) {
	if r.chunks.get(h) == nil {
		return
	}
	if r.stalls == nil {
		r.stalls = make(map[chunkfs.Handle]struct{})
	}
	r.stalls[h] = struct{}{}
}

// sourceGone forgets the replica of h that clone pc's source was counted
// for, after the target answered that the source holds no such chunk
// (chunkserver Clone's KindNotExist): the record was wrong, and every
// later clone would pick that source again. The next round clones from
// another replica, or finds the chunk shorter of replicas than it looked.
// Should the source hold the chunk after all, its next heartbeat sample
// counts it again.
func (r *registry) sourceGone(h chunkfs.Handle, pc *pendingClone, now time.Time) {
	if v, ok := pc.source.chunks.get(h); ok && v == pc.version {
		r.dropReplica(pc.source, h, now)
	}
}

// repairWindow is the span the repair rate is measured over.
const repairWindow = time.Minute

// pruneDone drops from done, oldest first, what is older than the window.
func pruneDone(done []repairDone, now time.Time) []repairDone {
	i := 0
	for i < len(done) && now.Sub(done[i].at) > repairWindow {
		i++
	}
	return done[i:]
}

// rateOf returns the bytes per second of done over the window.
func rateOf(done []repairDone) float64 {
	var sum int64
	for _, d := range done {
		sum += d.bytes
	}
	return float64(sum) / repairWindow.Seconds()
}

// repairRate returns the bytes per second cloned over the last minute.
func (r *registry) repairRate(now time.Time) float64 {
	r.recent = pruneDone(r.recent, now)
	return rateOf(r.recent)
}

// trim condemns the excess counted replicas of h beyond want, keeping the
// best rack spread (placement.Trim). A replica on a server being
// decommissioned is never trimmed: it stays until the server is removed.
func (r *registry) trim(h chunkfs.Handle, v chunkfs.Version, want int, now time.Time) []trimOrder {
	holders := r.counted(h, v)
	slices.SortFunc(holders, func(a, b *server) int { return cmpString(a.id, b.id) })
	hc := make([]placement.Server, len(holders))
	for i, s := range holders {
		hc[i] = placement.Server{ID: s.id, Rack: s.rack, Capacity: s.capacity, Used: s.used}
	}
	var out []trimOrder
	for _, i := range placement.Trim(hc, want) {
		r.condemn(holders[i], h, now)
		out = append(out, trimOrder{handle: h, server: holders[i]})
	}
	return out
}

// chunkHealth is what the registry says of one chunk for reports and fsck.
type chunkHealth struct {
	live     int  // live replicas at the current version
	cloning  bool // a clone is in flight
	corrupt  int  // corrupt replicas not yet replaced
	heldBack bool // replicas are held back (registry_away.go)
}

// health describes chunk h at logged version v.
func (r *registry) health(h chunkfs.Handle, v chunkfs.Version) chunkHealth {
	ci := r.chunks.get(h)
	if ci == nil {
		return chunkHealth{}
	}
	return chunkHealth{live: len(r.replicas(h, v)), cloning: r.clones[h] != nil, corrupt: int(ci.corrupt), heldBack: len(r.away[h]) > 0}
}
