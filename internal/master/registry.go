package master

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/placement"
)

// Bounds on what the registry keeps and hands out.
const (
	maxQueuedGarbage    = 1 << 20 // per chunkserver
	maxGarbagePerAnswer = 10000
	maxDoubts           = 1 << 20 // per chunkserver
	maxDisks            = 256     // per chunkserver
)

// server is what the master knows of one chunkserver. Never persisted.
// Every field is guarded by the master's regMu, addr included: a server
// that registers again has its record rewritten (registry.reset). A call
// to servers takes their addresses under regMu first (addrs).
type server struct {
	id, addr, rack string
	capacity, used int64 // bytes of its distinct disks; bytes of chunk data it holds
	free           int64 // bytes free on its distinct disks
	disks          []disk
	load           int32
	lastBeat       time.Time
	alive          bool
	chunks         replicaSet                   // replicas it holds (registry_replicas.go)
	garbage        []chunkfs.Handle             // to tell it to delete
	doubt          map[chunkfs.Handle]uint64    // replicas whose Lease or Truncate call failed, not yet checked: when (registry.doubts)
	recent         placement.Recency            // its decaying count of chunks created on it
	forwards       placement.Recency            // its decaying count of new chunks' chains it forwards in (chain_order.go)
	again          bool                         // to be told to register again at its next heartbeat
	held           map[chunkfs.Handle]leaseLeft // leases it last reported holding as primary (registry_leases.go)
	heldAt         time.Time                    // when the master received that report
	cloning        int                          // clones in flight with it as target
	sourcing       int                          // clones in flight with it as source
	moveIn         int64                        // bytes of balancer moves in flight to it
	moveOut        int64                        // bytes of balancer moves in flight from it
	slot           uint16                       // its slot in the registry's server table, 0 until it holds a replica (slotOf)
}

// addrs returns the servers' addresses, for calls made without regMu; it
// needs regMu.
func addrs(servers []*server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.addr
	}
	return out
}

// disk is one file system a chunkserver keeps data on; servers sharing a
// file system report the same id.
type disk struct {
	id             string
	capacity, free int64
}

// stamp is a time as nanoseconds since the registry's epoch (the first
// time it was handed): 8 bytes where a time.Time takes 24, and a
// difference of two carries the monotonic clock's reading when the
// epoch and the time both have one, as time.Time's Sub does.
type stamp int64

// stampOf returns t as a stamp, setting the epoch to t on the first call.
func (r *registry) stampOf(t time.Time) stamp {
	if r.epoch.IsZero() {
		r.epoch = t
	}
	return stamp(t.Sub(r.epoch))
}

// timeOf returns the time of stamp s.
func (r *registry) timeOf(s stamp) time.Time { return r.epoch.Add(time.Duration(s)) }

// leaseRecord is a lease the master gave or adopted on a chunk: its
// primary and its end.
type leaseRecord struct {
	primary *server
	expiry  stamp
}

// leased reports whether h's lease, if any, may still be held at now.
func (r *registry) leased(h chunkfs.Handle, now time.Time) bool {
	l, ok := r.leases[h]
	return ok && r.stampOf(now) < l.expiry
}

// pruneLeases forgets the leases ended by now: a chunk keeps no lease
// record once its lease cannot be held. A Go map keeps the room of its
// most entries, so when the records fall below a quarter of the most seen
// at a prune since the map was made (after a burst of writes), they move
// to a map of their size.
func (r *registry) pruneLeases(now time.Time) {
	r.leasesPeak = max(r.leasesPeak, len(r.leases))
	at := r.stampOf(now)
	for h, l := range r.leases {
		if l.expiry <= at {
			delete(r.leases, h)
			if ci := r.chunks.get(h); ci != nil {
				r.gc(h, ci)
			}
		}
	}
	r.shrinkLeases()
	r.leasesKept = len(r.leases)
}

// shrinkLeases moves the lease records to a map of their size if they
// take a quarter of the most the map held or less.
func (r *registry) shrinkLeases() {
	if r.leasesPeak < minLeasePrune || len(r.leases) > r.leasesPeak/4 {
		return
	}
	m := make(map[chunkfs.Handle]leaseRecord, len(r.leases)) // maps.Clone keeps the room
	for h, l := range r.leases {
		m[h] = l
	}
	r.leases, r.leasesPeak = m, len(m)
}

// pendingClone is a re-replication or a balancer move in flight: target
// pulls version v from source; a move then trims source's replica.
type pendingClone struct {
	target, source *server
	version        chunkfs.Version
	started        time.Time
	live           int   // counted replicas when it started (plan's priority)
	stalled        bool  // the chunk's clone before this one ran into its deadline (plan)
	move           bool  // a balancer move (registry_balance.go)
	length         int64 // a move's chunk length when it started
	want           int   // a move's chunk replication when it started
}

// registry is the single owner of what the master knows of chunkservers
// and replicas: holders and their versions, primaries and lease expiry,
// replicas in doubt, fences, clones in flight and queued garbage. It is pure
// state: no lock, no clock, no network. Its methods take the time as a
// value and return decisions (grant or wait, fence, clone, trim, delete);
// the master holds Master.regMu around every call and makes the RPCs.
type registry struct {
	servers map[string]*server
	byAddr  map[string]*server
	chunks  chunkTable // registry_chunks.go
	slots   []*server  // the server table: slot i+1 is slots[i], nil when free (slotOf)
	free    []uint16   // slots given back (freeSlot)
	rng     *rand.Rand
	doubts  uint64 // counts doubt calls, to tell a doubt from a later one

	adoption adoptRule // which reported leases a new leader adopts (registry_leases.go)

	repaired  int64        // clones completed
	repairing int          // repair clones in flight (not moves)
	recent    []repairDone // clones completed in the last minute, oldest first (repairRate)

	drain map[string]bool // IDs of the servers being decommissioned (registry_drain.go)
	bal   balancer        // the rebalancer (registry_balance.go)

	safe *safeCount // the located chunks, counted while in safe mode; nil after (registry_safemode.go)

	epoch      time.Time                          // the time stamp 0 stands for (stampOf)
	leases     map[chunkfs.Handle]leaseRecord     // the lease on record of each chunk that has one, until it ends (pruneLeases)
	leasesKept int                                // len(leases) after the last pruneLeases
	leasesPeak int                                // the most lease records a prune found since the map was made
	busy       map[chunkfs.Handle]int32           // grants or cuts in flight on a chunk: its replicas are not all recorded yet
	more       map[chunkfs.Handle][]*server       // a chunk's holders beyond its record's three
	bigTold    map[chunkfs.Handle]chunkfs.Version // versions told of 32 bits or more
	clones     map[chunkfs.Handle]*pendingClone   // the clone in flight of each chunk that has one
	blockedAt  map[chunkfs.Handle]time.Time       // when a writer last waited on a chunk for want of replicas (block)
	stalls     map[chunkfs.Handle]struct{}        // chunks whose last clone ran into its deadline, until one is counted (plan)
	away       map[chunkfs.Handle][]awayReplica   // replicas that left a chunk's counted set under a lease, held back (registry_away.go)

	copies map[chunkfs.Handle]chunkfs.Version // copy-on-write copies being made, not yet logged (registry_snapshot.go)

	// revoking is what the last plan found held back from repair by a
	// lease alone: chunks down to one live replica, the primary, whose
	// lease the master revokes (registry_repair.go).
	revoking []chunkfs.Handle
	// fencing is what it found held back by a lease whose primary the
	// master lost (dead, or its replica dropped): chunks down to one live
	// replica, a secondary's, which the master moves to the next version
	// with no lease before cloning it (registry_repair.go).
	fencing []chunkfs.Handle
	// leaving is what it found with replicas held back (leave) and no
	// lease out: chunks whose counted replicas the master moves to the
	// next version with no lease, leaving the held-back ones stale
	// (leftBehind).
	leaving []chunkfs.Handle

	// order is every server in ID order, kept until a server is added or
	// removed (byID): placing a chunk among 10,000 servers sorted them
	// all each time, 9 ms under the lock.
	order    []*server
	orderOK  bool
	orderGen uint64    // counts the rebuilds of order
	liveList []*server // the live ones, in ID order, kept until one's alive changes (aliveChanged)
	liveGen  uint64    // orderGen when liveList was built; 0: to be rebuilt
}

// repairDone is one completed clone, for the repair rate.
type repairDone struct {
	at    time.Time
	bytes int64
}

func newRegistry(seed uint64) *registry {
	return &registry{
		servers:  make(map[string]*server),
		leases:   make(map[chunkfs.Handle]leaseRecord),
		busy:     make(map[chunkfs.Handle]int32),
		byAddr:   make(map[string]*server),
		rng:      rand.New(rand.NewPCG(seed, 0x636b6673)),
		bal:      balancer{on: true, threshold: DefaultBalanceThreshold, maxMoves: DefaultMaxMoves},
		adoption: adoptRule{on: true, age: defaultAdoptAge, rate: defaultAdoptRate},
	}
}

// info returns h's record, creating it dirty.
func (r *registry) info(h chunkfs.Handle) *chunkInfo {
	if ci := r.chunks.get(h); ci != nil {
		return ci
	}
	return r.chunks.add(h)
}

// markDirty notes that h's replica set changed: plan looks at it next.
// A chunk with no record has nothing for plan to look at.
func (r *registry) markDirty(h chunkfs.Handle) { r.chunks.mark(h) }

// addReplica records that s holds version v of h.
func (r *registry) addReplica(s *server, h chunkfs.Handle, v chunkfs.Version) {
	s.chunks.set(h, v)
	ci := r.info(h)
	r.markDirty(h)
	r.addHolder(h, ci, s)
	r.recount(h)
}

// dropReplica forgets s's replica of h. A lease s holds on h is kept on
// record until it ends: a server the master gave up on may still be alive
// and acting as primary, so no other may be named before then. When a lease
// is out, the chunk is fenced (its next write needs a new version) and s's
// replica is away (leave).
func (r *registry) dropReplica(s *server, h chunkfs.Handle, now time.Time) {
	v := s.chunks.at(h)
	s.chunks.remove(h)
	r.dropHolder(s, h, v, now)
}

// dropHolder is dropReplica once s's replica set no longer has h, which
// s held at v.
func (r *registry) dropHolder(s *server, h chunkfs.Handle, v chunkfs.Version, now time.Time) {
	ci := r.chunks.get(h)
	if ci == nil {
		return
	}
	gone := r.removeHolder(h, ci, s)
	r.markDirty(h)
	if gone && r.leased(h, now) {
		ci.setFence(true)
		r.leave(s, h, v)
	}
	r.recount(h)
	r.gc(h, ci)
}

// gc deletes h's record once nothing in it matters.
func (r *registry) gc(h chunkfs.Handle, ci *chunkInfo) {
	_, leased := r.leases[h]
	if r.holderCount(h, ci) == 0 && !leased && ci.told == 0 && r.clones[h] == nil && r.busy[h] == 0 && ci.corrupt == 0 && r.away[h] == nil {
		r.dropRecord(h)
	}
}

// dropRecord forgets h's record and what is kept of it beside.
func (r *registry) dropRecord(h chunkfs.Handle) {
	r.chunks.remove(h)
	delete(r.leases, h)
	delete(r.busy, h)
	delete(r.more, h)
	delete(r.bigTold, h)
	delete(r.blockedAt, h)
	delete(r.stalls, h)
	delete(r.away, h)
}

// doubt forgets s's replica of h after a Lease or Truncate call to s
// failed. The call may still have reached s, so s may hold the new version
// while a report it built earlier says otherwise: until s is asked
// (verifyDoubts), no old report of it makes the replica stale.
func (r *registry) doubt(s *server, h chunkfs.Handle, now time.Time) {
	r.dropReplica(s, h, now)
	if s.doubt == nil {
		s.doubt = make(map[chunkfs.Handle]uint64)
	}
	if _, ok := s.doubt[h]; ok || len(s.doubt) < maxDoubts {
		r.doubts++
		s.doubt[h] = r.doubts
	}
}

// clearDoubt notes that s's replica of h is settled.
func (r *registry) clearDoubt(s *server, h chunkfs.Handle) {
	delete(s.doubt, h)
	if len(s.doubt) == 0 {
		s.doubt = nil
	}
}

// condemn forgets s's replica of h and queues it for deletion.
func (r *registry) condemn(s *server, h chunkfs.Handle, now time.Time) {
	r.dropReplica(s, h, now)
	r.clearDoubt(s, h)
	r.queueGarbage(s, h)
}

// dropServer forgets every replica s holds.
func (r *registry) dropServer(s *server, now time.Time) {
	held := s.chunks
	s.chunks = replicaSet{}
	for h, v := range held.all() {
		r.dropHolder(s, h, v, now)
	}
}

// replicas returns the live servers holding version v of h.
func (r *registry) replicas(h chunkfs.Handle, v chunkfs.Version) []*server {
	ci := r.chunks.get(h)
	if ci == nil {
		return nil
	}
	var out []*server
	for s := range r.holders(h, ci) {
		if s.alive && s.chunks.at(h) == v {
			out = append(out, s)
		}
	}
	return out
}

// lease returns h's primary if its lease is valid at now and the primary
// is alive and still holds the chunk.
func (r *registry) lease(h chunkfs.Handle, now time.Time) (*server, time.Time) {
	ci := r.chunks.get(h)
	l := r.leases[h]
	if ci == nil || !r.leased(h, now) || !l.primary.alive || !r.holds(h, ci, l.primary) {
		return nil, time.Time{}
	}
	return l.primary, r.timeOf(l.expiry)
}

// placed reports whether the master knows a replica of h (live or not).
func (r *registry) placed(h chunkfs.Handle) bool {
	ci := r.chunks.get(h)
	return ci != nil && r.holderCount(h, ci) > 0
}

// queueGarbage tells s, at its next heartbeat, to delete h.
func (r *registry) queueGarbage(s *server, h chunkfs.Handle) {
	if len(s.garbage) < maxQueuedGarbage {
		s.garbage = append(s.garbage, h)
	}
}

// queued reports whether a deletion of h is queued for s.
func (s *server) queued(h chunkfs.Handle) bool {
	return slices.Contains(s.garbage, h)
}

// queuedSet returns the chunks whose deletion is queued for s.
func (s *server) queuedSet() map[chunkfs.Handle]struct{} {
	out := make(map[chunkfs.Handle]struct{}, len(s.garbage))
	for _, h := range s.garbage {
		out[h] = struct{}{}
	}
	return out
}

// forget drops chunks that no longer exist and queues them as garbage on
// every server holding them.
func (r *registry) forget(handles []chunkfs.Handle, now time.Time) {
	for _, h := range handles {
		ci := r.chunks.get(h)
		if ci == nil {
			continue
		}
		for _, s := range r.appendHolders(nil, h, ci) {
			r.queueGarbage(s, h)
			r.dropReplica(s, h, now)
		}
		if c := r.clones[h]; c != nil {
			r.queueGarbage(c.target, h) // whatever it stores is garbage
			delete(r.clones, h)
		}
		r.dropRecord(h)
	}
}

// live returns the live servers, in ID order, not to be changed: the
// slice is kept until a server is added, removed, dies or comes back.
func (r *registry) live() []*server {
	all := r.byID()
	if r.liveGen != r.orderGen {
		r.liveList = r.liveList[:0]
		for _, s := range all {
			if s.alive {
				r.liveList = append(r.liveList, s)
			}
		}
		r.liveGen = r.orderGen
	}
	return r.liveList
}

// aliveChanged notes that a server died or came back.
func (r *registry) aliveChanged() { r.liveGen = 0 }

// byID returns every server in ID order, not to be changed: the slice is
// kept until a server is added or removed (serversChanged).
func (r *registry) byID() []*server {
	if !r.orderOK || len(r.order) != len(r.servers) {
		r.order = r.order[:0]
		for _, s := range r.servers {
			r.order = append(r.order, s)
		}
		slices.SortFunc(r.order, func(a, b *server) int { return cmpString(a.id, b.id) })
		r.orderOK = true
		r.orderGen++
	}
	return r.order
}

// serversChanged notes that a server was added to or removed from
// r.servers.
func (r *registry) serversChanged() { r.orderOK = false }

// candidate describes s to the placement policy.
func candidate(s *server, now time.Time, cfg placement.Config) placement.Server {
	return placement.Server{ID: s.id, Rack: s.rack, Capacity: s.capacity, Used: s.used, Free: s.free,
		Load: int(s.load), Recent: s.recent.Value(now, cfg.RecentHalfLife), Clones: s.cloning + s.sourcing}
}

// choose picks up to n live servers with room for a new replica, excluding
// those in skip and those being decommissioned, and counts the creations; they come in the order writers
// should push along (orderChain).
func (r *registry) choose(cfg placement.Config, n int, now time.Time, skip []*server) ([]*server, error) {
	var live []*server
	for _, s := range r.live() {
		if !slices.Contains(skip, s) && !r.draining(s) {
			live = append(live, s)
		}
	}
	cand := make([]placement.Server, len(live))
	for i, s := range live {
		cand[i] = candidate(s, now, cfg)
	}
	idx, err := placement.Choose(cfg, cand, n, r.rng)
	if err != nil {
		return nil, chunkfs.E("place chunk", "", chunkfs.KindNoSpace, "no live chunkserver with free space")
	}
	out := make([]*server, len(idx))
	for i, j := range idx {
		out[i] = live[j]
		live[j].recent.Add(now, cfg.RecentHalfLife)
	}
	r.orderChain(out, now, cfg.RecentHalfLife)
	return out, nil
}

// markDead declares servers silent for deadAfter dead and forgets their
// replicas (fencing the chunks they held under a lease).
func (r *registry) markDead(now time.Time, deadAfter time.Duration) []*server {
	var dead []*server
	for _, s := range r.servers {
		if s.alive && now.Sub(s.lastBeat) > deadAfter {
			s.alive = false
			r.aliveChanged()
			r.dropServer(s, now)
			dead = append(dead, s)
		}
	}
	slices.SortFunc(dead, func(a, b *server) int { return cmpString(a.id, b.id) })
	return dead
}

// sorted returns every server, live or dead, in ID order.
func (r *registry) sorted() []*server {
	return slices.Clone(r.byID())
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sizes returns the chunk records and the replicas the registry holds
// (registryBytes).
func (r *registry) sizes() (records, replicas int64) {
	for _, s := range r.servers {
		replicas += int64(s.chunks.len())
	}
	return int64(r.chunks.len()), replicas
}
