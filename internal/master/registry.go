package master

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/placement"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Bounds on what the registry keeps and hands out.
const (
	maxQueuedGarbage    = 1 << 20 // per chunkserver
	maxGarbagePerAnswer = 10000
	maxDoubts           = 1 << 20 // per chunkserver
	maxDisks            = 256     // per chunkserver
)

// server is what the master knows of one chunkserver. Never persisted.
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
}

// disk is one file system a chunkserver keeps data on; servers sharing a
// file system report the same id.
type disk struct {
	id             string
	capacity, free int64
}

// disksFrom converts a server's reported disks, keeping at most maxDisks.
func disksFrom(in []*pb.Disk) []disk {
	out := make([]disk, 0, min(len(in), maxDisks))
	for _, d := range in[:min(len(in), maxDisks)] {
		out = append(out, disk{id: d.Id, capacity: d.Capacity, free: d.Free})
	}
	return out
}

func disksTo(in []disk) []*pb.Disk {
	out := make([]*pb.Disk, len(in))
	for i, d := range in {
		out[i] = &pb.Disk{Id: d.id, Capacity: d.capacity, Free: d.free}
	}
	return out
}

// chunkInfo is the in-memory part of a chunk: where it lives and its lease.
type chunkInfo struct {
	holders []*server       // servers that reported or were given a replica
	primary *server         // lease holder, nil when none
	expiry  time.Time       // lease end
	told    chunkfs.Version // highest version sent to any chunkserver
}

// registry holds chunkservers, chunk locations and leases.
type registry struct {
	mu      sync.Mutex // guards every field below and the servers and chunkInfos they point to
	servers map[string]*server
	byAddr  map[string]*server
	chunks  map[chunkfs.Handle]*chunkInfo
	rng     *rand.Rand
	doubts  uint64 // counts doubtLocked calls, to tell a doubt from a later one
}

func newRegistry(cfg Config) *registry {
	now := cfg.Clock.Now()
	return &registry{
		servers: make(map[string]*server),
		byAddr:  make(map[string]*server),
		chunks:  make(map[chunkfs.Handle]*chunkInfo),
		rng:     rand.New(rand.NewPCG(uint64(now.UnixNano()), 0x636b6673)),
	}
}

// addReplicaLocked records that s holds version v of h.
func (r *registry) addReplicaLocked(s *server, h chunkfs.Handle, v chunkfs.Version) {
	s.chunks[h] = v
	ci := r.chunks[h]
	if ci == nil {
		ci = &chunkInfo{}
		r.chunks[h] = ci
	}
	if !slices.Contains(ci.holders, s) {
		ci.holders = append(ci.holders, s)
	}
}

// dropReplicaLocked forgets s's replica of h. A lease s holds on h is kept
// on record until it ends: a server the master gave up on may still be
// alive and acting as primary, so no other may be named before then.
func (r *registry) dropReplicaLocked(s *server, h chunkfs.Handle) {
	delete(s.chunks, h)
	ci := r.chunks[h]
	if ci == nil {
		return
	}
	ci.holders = slices.DeleteFunc(ci.holders, func(x *server) bool { return x == s })
	if len(ci.holders) == 0 && ci.primary == nil && ci.told == 0 {
		delete(r.chunks, h)
	}
}

// doubtLocked forgets s's replica of h after a Lease or Truncate call to s
// failed. The call may still have reached s, so s may hold the new version
// while a report it built earlier says otherwise: until s is asked
// (verifyDoubts), no old report of it makes the replica stale.
func (r *registry) doubtLocked(s *server, h chunkfs.Handle) {
	r.dropReplicaLocked(s, h)
	if s.doubt == nil {
		s.doubt = make(map[chunkfs.Handle]uint64)
	}
	if _, ok := s.doubt[h]; ok || len(s.doubt) < maxDoubts {
		r.doubts++
		s.doubt[h] = r.doubts
	}
}

// clearDoubtLocked notes that s's replica of h is settled.
func (r *registry) clearDoubtLocked(s *server, h chunkfs.Handle) {
	delete(s.doubt, h)
	if len(s.doubt) == 0 {
		s.doubt = nil
	}
}

// dropServerLocked forgets every replica s holds.
func (r *registry) dropServerLocked(s *server) {
	for h := range s.chunks {
		r.dropReplicaLocked(s, h)
	}
}

// replicasLocked returns the live servers holding version v of h.
func (r *registry) replicasLocked(h chunkfs.Handle, v chunkfs.Version) []*server {
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

// leaseLocked returns h's primary if its lease is valid at now and the
// primary is alive and still holds the chunk.
func (r *registry) leaseLocked(h chunkfs.Handle, now time.Time) (*server, time.Time) {
	ci := r.chunks[h]
	if ci == nil || ci.primary == nil || !ci.primary.alive || !now.Before(ci.expiry) || !slices.Contains(ci.holders, ci.primary) {
		return nil, time.Time{}
	}
	return ci.primary, ci.expiry
}

// leaseOutstandingLocked reports whether a lease on h might still be held,
// by a live server or not.
func (r *registry) leaseOutstandingLocked(h chunkfs.Handle, now time.Time) bool {
	ci := r.chunks[h]
	return ci != nil && ci.primary != nil && now.Before(ci.expiry)
}

// queueGarbageLocked tells s, at its next heartbeat, to delete h.
func (r *registry) queueGarbageLocked(s *server, h chunkfs.Handle) {
	if len(s.garbage) < maxQueuedGarbage {
		s.garbage = append(s.garbage, h)
	}
}

// forget drops chunks that no longer exist and queues them as garbage on
// every server holding them.
func (r *registry) forget(handles []chunkfs.Handle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range handles {
		ci := r.chunks[h]
		if ci == nil {
			continue
		}
		for _, s := range slices.Clone(ci.holders) {
			r.queueGarbageLocked(s, h)
			r.dropReplicaLocked(s, h)
		}
		delete(r.chunks, h)
	}
}

// liveLocked returns the live servers, in ID order.
func (r *registry) liveLocked() []*server {
	var out []*server
	for _, s := range r.servers {
		if s.alive {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *server) int { return cmpString(a.id, b.id) })
	return out
}

// chooseLocked picks up to n live servers for a new replica, excluding
// those in skip, and counts the creations; they come in the order writers
// should push along (orderChainLocked).
func (r *registry) chooseLocked(cfg placement.Config, n int, now time.Time, skip []*server) ([]*server, error) {
	var live []*server
	for _, s := range r.liveLocked() {
		if !slices.Contains(skip, s) {
			live = append(live, s)
		}
	}
	cand := make([]placement.Server, len(live))
	for i, s := range live {
		cand[i] = placement.Server{ID: s.id, Rack: s.rack, Capacity: s.capacity, Used: s.used, Load: int(s.load), Recent: s.recent.Value(now, cfg.RecentHalfLife)}
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
	r.orderChainLocked(out, now, cfg.RecentHalfLife)
	return out, nil
}

// markDeadLocked declares silent servers dead and forgets their replicas.
func (r *registry) markDeadLocked(now time.Time, deadAfter time.Duration) []*server {
	var dead []*server
	for _, s := range r.servers {
		if s.alive && now.Sub(s.lastBeat) > deadAfter {
			s.alive = false
			r.dropServerLocked(s)
			dead = append(dead, s)
		}
	}
	return dead
}

// sortedLocked returns every server, live or dead, in ID order.
func (r *registry) sortedLocked() []*server {
	out := make([]*server, 0, len(r.servers))
	for _, s := range r.servers {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *server) int { return cmpString(a.id, b.id) })
	return out
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
