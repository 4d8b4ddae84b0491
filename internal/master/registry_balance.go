package master

import (
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/placement"
)

// balancer is the rebalancer's part of the registry: whether it runs, its
// threshold, its bound on moves in flight and what it has moved.
type balancer struct {
	on        bool
	threshold float64 // percentage points of capacity around the mean
	maxMoves  int
	inFlight  int
	moved     int64
	bytes     int64
	recent    []repairDone // moves completed in the last minute, oldest first
	idleUntil time.Time    // after a round found nothing to move, none is sought before this
}

// Bounds on the balancer's work per round: each pair of servers tried
// scans the source's chunks, so a round tries a few pairs, and one that
// finds nothing to move waits balanceIdle before the next search (a
// balanced cluster costs nothing; a new server waits that long at most).
const (
	maxPairsPerMove = 8
	balanceIdle     = 10 * time.Second
)

// balanceStatus is what admin balance and the report show.
type balanceStatus struct {
	running      bool
	threshold    float64
	inFlight     int
	moved, bytes int64
	spread, rate float64 // percentage points; bytes per second over the last minute
}

// configureBalance sets whether the rebalancer runs, its threshold and its
// bound on moves in flight.
func (r *registry) configureBalance(on bool, threshold float64, maxMoves int) {
	r.bal.on, r.bal.threshold, r.bal.maxMoves = on, threshold, maxMoves
}

// setBalance starts or stops the rebalancer; a threshold of 0 keeps the
// current one.
func (r *registry) setBalance(on bool, threshold float64) {
	r.bal.on, r.bal.idleUntil = on, time.Time{}
	if threshold > 0 {
		r.bal.threshold = threshold
	}
}

// balanceStatus describes the rebalancer at now.
func (r *registry) balanceStatus(cfg placement.Config, now time.Time) balanceStatus {
	r.bal.recent = pruneDone(r.bal.recent, now)
	_, spread := placement.Utilisation(r.balanceCandidates(cfg, now))
	return balanceStatus{running: r.bal.on, threshold: r.bal.threshold, inFlight: r.bal.inFlight,
		moved: r.bal.moved, bytes: r.bal.bytes, spread: 100 * spread, rate: rateOf(r.bal.recent)}
}

// balanceCandidates describes the live servers not being decommissioned,
// with the bytes of moves in flight counted as already moved.
func (r *registry) balanceCandidates(cfg placement.Config, now time.Time) []placement.Server {
	var out []placement.Server
	for _, s := range r.live() {
		if !r.draining(s) {
			c := candidate(s, now, cfg)
			c.Used += s.moveIn - s.moveOut
			out = append(out, c)
		}
	}
	return out
}

// balance plans replica moves towards even utilisation (GFS §4.3), at most
// the balancer's bound in flight and maxClones clones per server (the
// clone throttle repair shares): each move clones a chunk from an
// over-utilised server to an under-utilised one (placement.BalanceMoves),
// keeping the chunk's rack spread, and trims the source's replica once the
// clone is counted (cloneDone), so the chunk never has fewer than its
// replication. Only healthy chunks move: not under a lease, not busy, with
// their full replication counted and a replica on the source.
func (r *registry) balance(cfg placement.Config, lookup chunkLookup, maxClones int, now time.Time) []cloneOrder {
	var out []cloneOrder
	for r.bal.on && r.bal.inFlight < r.bal.maxMoves && !now.Before(r.bal.idleUntil) {
		o, ok := r.nextMove(cfg, lookup, maxClones, now)
		if !ok {
			if len(out) == 0 && r.bal.inFlight == 0 {
				r.bal.idleUntil = now.Add(balanceIdle)
			}
			break
		}
		out = append(out, o)
	}
	return out
}

// nextMove plans the best move there is, if any.
func (r *registry) nextMove(cfg placement.Config, lookup chunkLookup, maxClones int, now time.Time) (cloneOrder, bool) {
	var servers []*server
	for _, s := range r.live() {
		if !r.draining(s) {
			servers = append(servers, s)
		}
	}
	cand := r.balanceCandidates(cfg, now)
	moves := placement.BalanceMoves(cfg, cand, r.bal.threshold/100, maxClones)
	for _, mv := range moves[:min(len(moves), maxPairsPerMove)] {
		from, to := servers[mv.From], servers[mv.To]
		if h, ok := r.movable(from, to, lookup, now); ok {
			v, want, length, _, _ := lookup(h)
			return r.startMove(h, v, length, want, from, to, now), true
		}
	}
	return cloneOrder{}, false
}

// movable picks the chunk of lowest handle that can move from one server
// to another: healthy, at its logged version on from, held (or about to be
// deleted, or in doubt) nowhere on to, whose rack spread the move keeps,
// and small enough not to overshoot (narrows).
func (r *registry) movable(from, to *server, lookup chunkLookup, now time.Time) (chunkfs.Handle, bool) {
	for h, held := range from.chunks.all() { // in handle order: the first found is the lowest
		v, want, length, _, ok := lookup(h)
		ci := r.chunks.get(h)
		if !ok || held != v || length <= 0 || ci == nil || r.clones[h] != nil || r.busy[h] > 0 || r.leaseOutstanding(h, now) {
			continue
		}
		if to.chunks.has(h) || r.heldBack(to, h, v) {
			continue
		}
		if _, doubted := to.doubt[h]; doubted || containsHandle(to.garbage, h) {
			continue
		}
		holders := r.counted(h, v)
		if len(holders) < want {
			continue
		}
		racks := make([]string, len(holders))
		for i, s := range holders {
			racks[i] = s.rack
		}
		if placement.KeepsSpread(racks, from.rack, to.rack) && narrows(from, to, length) {
			return h, true
		}
	}
	return 0, false
}

// narrows reports whether moving length bytes from one server to another
// leaves the source at least as utilised as the target: a move that
// overshoots (a chunk large against the gap) would only swap the two.
func narrows(from, to *server, length int64) bool {
	fu := float64(from.used+from.moveIn-from.moveOut-length) / float64(from.capacity)
	tu := float64(to.used+to.moveIn-to.moveOut+length) / float64(to.capacity)
	return fu >= tu
}

func containsHandle(hs []chunkfs.Handle, h chunkfs.Handle) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// startMove records the move of h from one server to another as a clone
// in flight, with from as the clone's source.
func (r *registry) startMove(h chunkfs.Handle, v chunkfs.Version, length int64, want int, from, to *server, now time.Time) cloneOrder {
	live := len(r.counted(h, v))
	pc := &pendingClone{target: to, source: from, version: v, started: now, live: live, move: true, length: length, want: want}
	r.info(h)
	r.setClone(h, pc)
	from.sourcing++
	to.cloning++
	from.moveOut += length
	to.moveIn += length
	r.bal.inFlight++
	return cloneOrder{handle: h, version: v, length: length, live: live, target: to, source: from, pending: pc,
		targetAddr: to.addr, sourceAddr: from.addr, move: true}
}

// moveDone ends move pc of h whose clone was counted (counted true) or
// not: a counted one trims the source's replica, if the chunk keeps its
// full replication without it; the figures of both servers are moved on
// until their next heartbeats report them. It returns whether the source
// was trimmed.
func (r *registry) moveDone(h chunkfs.Handle, pc *pendingClone, counted bool, now time.Time) bool {
	from, to := pc.source, pc.target
	r.bal.inFlight--
	from.moveOut -= pc.length
	to.moveIn -= pc.length
	if !counted {
		return false
	}
	to.used += pc.length
	held := from.chunks.has(h)
	if !held || !from.alive || r.draining(from) || len(r.counted(h, pc.version))-1 < pc.want {
		return false
	}
	r.condemn(from, h, now)
	from.used -= pc.length
	r.bal.moved++
	r.bal.bytes += pc.length
	r.bal.recent = append(pruneDone(r.bal.recent, now), repairDone{at: now, bytes: pc.length})
	return true
}
