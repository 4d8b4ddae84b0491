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
	chunks         map[chunkfs.Handle]chunkfs.Version // replicas it holds
	garbage        []chunkfs.Handle                   // to tell it to delete
	doubt          map[chunkfs.Handle]uint64          // replicas whose Lease or Truncate call failed, not yet checked: when (registry.doubts)
	recent         placement.Recency                  // its decaying count of chunks created on it
	forwards       placement.Recency                  // its decaying count of new chunks' chains it forwards in (chain_order.go)
	again          bool                               // to be told to register again at its next heartbeat
	held           map[chunkfs.Handle]heldLease       // leases it last reported holding as primary (registry_leases.go)
	cloning        int                                // clones in flight with it as target
	sourcing       int                                // clones in flight with it as source
	moveIn         int64                              // bytes of balancer moves in flight to it
	moveOut        int64                              // bytes of balancer moves in flight from it
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

// chunkInfo is the in-memory part of a chunk: where it lives and its lease.
type chunkInfo struct {
	holders []*server       // servers that reported or were given a replica
	primary *server         // lease holder, nil when none
	expiry  time.Time       // lease end
	told    chunkfs.Version // highest version sent to any chunkserver
	// fence is set when the replica set shrank while a lease was out: the
	// survivors must move to a new version before the next write is
	// acknowledged, so that the lost replica is stale if it comes back.
	fence   bool
	clone   *pendingClone // the clone in flight, nil when none
	blocked time.Time     // when a writer last waited on the chunk for want of replicas
	corrupt int           // corrupt replicas reported and not yet replaced by a clone
	busy    int           // grants or cuts in flight: their replicas are not all recorded yet
}

// pendingClone is a re-replication or a balancer move in flight: target
// pulls version v from source; a move then trims source's replica.
type pendingClone struct {
	target, source *server
	version        chunkfs.Version
	started        time.Time
	live           int   // counted replicas when it started (plan's priority)
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
	chunks  map[chunkfs.Handle]*chunkInfo
	rng     *rand.Rand
	doubts  uint64 // counts doubt calls, to tell a doubt from a later one

	// dirty holds the chunks whose replica set changed since plan last
	// found them healthy: plan looks only at these, and at every chunk
	// on a full sweep.
	dirty map[chunkfs.Handle]struct{}

	adoption adoptRule // which reported leases a new leader adopts (registry_leases.go)

	repaired  int64        // clones completed
	repairing int          // repair clones in flight (not moves)
	recent    []repairDone // clones completed in the last minute, oldest first (repairRate)

	drain map[string]bool // IDs of the servers being decommissioned (registry_drain.go)
	bal   balancer        // the rebalancer (registry_balance.go)

	safe *safeCount // the located chunks, counted while in safe mode; nil after (registry_safemode.go)

	copies map[chunkfs.Handle]chunkfs.Version // copy-on-write copies being made, not yet logged (registry_snapshot.go)

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
		byAddr:   make(map[string]*server),
		chunks:   make(map[chunkfs.Handle]*chunkInfo),
		dirty:    make(map[chunkfs.Handle]struct{}),
		rng:      rand.New(rand.NewPCG(seed, 0x636b6673)),
		bal:      balancer{on: true, threshold: DefaultBalanceThreshold, maxMoves: DefaultMaxMoves},
		adoption: adoptRule{on: true, age: defaultAdoptAge, rate: defaultAdoptRate},
	}
}

// info returns h's record, creating it.
func (r *registry) info(h chunkfs.Handle) *chunkInfo {
	ci := r.chunks[h]
	if ci == nil {
		ci = &chunkInfo{}
		r.chunks[h] = ci
		r.dirty[h] = struct{}{}
	}
	return ci
}

// addReplica records that s holds version v of h.
func (r *registry) addReplica(s *server, h chunkfs.Handle, v chunkfs.Version) {
	s.chunks[h] = v
	r.dirty[h] = struct{}{}
	ci := r.info(h)
	if !slices.Contains(ci.holders, s) {
		ci.holders = append(ci.holders, s)
	}
	r.recount(h)
}

// dropReplica forgets s's replica of h. A lease s holds on h is kept on
// record until it ends: a server the master gave up on may still be alive
// and acting as primary, so no other may be named before then. When a lease
// is out, the chunk is fenced: its next write needs a new version.
func (r *registry) dropReplica(s *server, h chunkfs.Handle, now time.Time) {
	delete(s.chunks, h)
	ci := r.chunks[h]
	if ci == nil {
		return
	}
	n := len(ci.holders)
	ci.holders = slices.DeleteFunc(ci.holders, func(x *server) bool { return x == s })
	r.dirty[h] = struct{}{}
	if len(ci.holders) < n && ci.primary != nil && now.Before(ci.expiry) {
		ci.fence = true
	}
	r.recount(h)
	r.gc(h, ci)
}

// gc deletes h's record once nothing in it matters.
func (r *registry) gc(h chunkfs.Handle, ci *chunkInfo) {
	if len(ci.holders) == 0 && ci.primary == nil && ci.told == 0 && ci.clone == nil && ci.busy == 0 && ci.corrupt == 0 {
		delete(r.chunks, h)
	}
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
	for h := range s.chunks {
		r.dropReplica(s, h, now)
	}
}

// replicas returns the live servers holding version v of h.
func (r *registry) replicas(h chunkfs.Handle, v chunkfs.Version) []*server {
	ci := r.chunks[h]
	if ci == nil {
		return nil
	}
	var out []*server
	for _, s := range ci.holders {
		if s.alive && s.chunks[h] == v {
			out = append(out, s)
		}
	}
	return out
}

// lease returns h's primary if its lease is valid at now and the primary
// is alive and still holds the chunk.
func (r *registry) lease(h chunkfs.Handle, now time.Time) (*server, time.Time) {
	ci := r.chunks[h]
	if ci == nil || ci.primary == nil || !ci.primary.alive || !now.Before(ci.expiry) || !slices.Contains(ci.holders, ci.primary) {
		return nil, time.Time{}
	}
	return ci.primary, ci.expiry
}

// placed reports whether the master knows a replica of h (live or not).
func (r *registry) placed(h chunkfs.Handle) bool {
	ci := r.chunks[h]
	return ci != nil && len(ci.holders) > 0
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
		ci := r.chunks[h]
		if ci == nil {
			continue
		}
		for _, s := range slices.Clone(ci.holders) {
			r.queueGarbage(s, h)
			r.dropReplica(s, h, now)
		}
		if c := ci.clone; c != nil {
			r.queueGarbage(c.target, h) // whatever it stores is garbage
		}
		delete(r.chunks, h)
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
		replicas += int64(len(s.chunks))
	}
	return int64(len(r.chunks)), replicas
}
