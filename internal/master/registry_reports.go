package master

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// versionOf returns a chunk's logged version and whether it exists
// (namespace.ChunkVersion).
type versionOf func(chunkfs.Handle) (chunkfs.Version, bool)

// figures is what a chunkserver says of itself in each report.
type figures struct {
	id, addr, rack       string
	capacity, used, free int64
	load                 int32
	disks                []disk
}

// replica is one replica a chunkserver reports: its chunk and version.
type replica struct {
	handle  chunkfs.Handle
	version chunkfs.Version
}

// fullReport is a chunkserver's registration: itself and every replica.
type fullReport struct {
	figures
	chunks []replica
	leases []heldReport // leases it holds as primary
}

// beat is a chunkserver's heartbeat: itself, a sample of its replicas,
// those it found corrupt and the leases it asks to extend.
type beat struct {
	figures
	sample  []replica
	corrupt []chunkfs.Handle
	extend  []chunkfs.Handle
	leases  []heldReport     // leases it holds as primary
	deleted []chunkfs.Handle // replicas it deleted since its last heartbeat to this master
}

// registered is the registry's answer to a full report.
type registered struct {
	garbage, stale []chunkfs.Handle  // replicas the server must delete
	ahead          []namespace.Chunk // replicas ahead of the log: their version is to be logged
	redial         string            // an address whose connection must be dropped and redialled
}

// register takes a chunkserver's full report: its replicas become the
// record of where they live, replacing what was held before. Replicas of
// chunks that do not exist are garbage; replicas with an older version than
// the logged one are stale, never counted, and deleted (but one a clone in
// flight to the server replaces is left to the clone's end). A replica whose
// deletion is queued for the server (condemned: trimmed, moved away) is
// not counted again: the report was built before the server deleted it.
//
// A report may have been built before a Lease or Truncate call raised a
// replica's version and be handled after the new version was logged. So a
// reported version below what was recorded for that server (from a call
// that succeeded) counts as the recorded one, and a replica whose call
// failed (in doubt) is not made stale by an old report: the next heartbeat
// sample that covers it settles it by asking the server (verifyDoubts).
//
// A server that registers again has restarted or lost the master: its old
// connection is dropped (redial), since gRPC's reconnection back-off would
// keep calls to it failing for many seconds.
func (r *registry) register(req fullReport, version versionOf, now time.Time) (registered, error) {
	var out registered
	s, known, doubt, err := r.reset(req, now)
	if err != nil {
		return out, err
	}
	if known != nil {
		out.redial = req.addr
	}
	condemned := s.queuedSet()
	for _, c := range inHandleOrder(req.chunks) {
		h, v := c.handle, c.version
		if known != nil {
			v = max(v, known.at(h)) // the report may predate a call that raised it
		}
		cur, ok := version(h)
		_, dying := condemned[h]
		if len(r.away) > 0 && known != nil && known.has(h) {
			r.back(s, h) // counted until this report: it left no set
		}
		switch {
		case !ok:
			out.garbage = append(out.garbage, h)
		case dying:
			// Condemned, its deletion still queued: the report predates it.
		case v < cur && r.cloning(h, s):
			// An old copy a clone in flight replaces: the report may
			// predate the commit, and deleting it now could delete the
			// clone. The clone's end decides (cloneDone).
		case v < cur && doubt[h] != 0:
			r.doubt(s, h, now)
		case v < cur:
			out.stale = append(out.stale, h)
			r.back(s, h)
		case r.heldBack(s, h, v):
			// Left the counted set under a lease: it may lack writes
			// acknowledged at this version, and waits to be left stale.
		case c.version > cur:
			out.ahead = append(out.ahead, namespace.Chunk{Handle: h, Version: v})
			fallthrough
		default:
			r.addReplica(s, h, v)
		}
	}
	s.chunks.fit()
	return out, nil
}

// reset creates or resets the record of the server in req. It returns what
// was recorded for that server before (nil for a new one): the versions of
// its replicas and the replicas in doubt.
func (r *registry) reset(req fullReport, now time.Time) (*server, *replicaSet, map[chunkfs.Handle]uint64, error) {
	var known *replicaSet
	var doubt map[chunkfs.Handle]uint64
	if s := r.servers[req.id]; s != nil {
		held := s.chunks // dropServer leaves it as it is
		known, doubt = &held, s.doubt
		r.dropServer(s, now)
		delete(r.byAddr, s.addr)
	} else if len(r.servers) >= maxServerCount {
		return nil, nil, nil, chunkfs.E("register", req.id, chunkfs.KindNoSpace, "too many chunkservers")
	}
	if old := r.byAddr[req.addr]; old != nil && old.id != req.id {
		old.alive = false
		r.aliveChanged()
		r.dropServer(old, now)
		r.freeSlot(old)
		r.forgetAway(old)
		delete(r.servers, old.id)
		r.serversChanged()
		if known == nil {
			known = &replicaSet{}
		}
	}
	s := r.servers[req.id]
	if s == nil {
		s = &server{id: req.id}
		r.servers[req.id] = s
		r.serversChanged()
	}
	s.addr, s.rack, s.capacity, s.used = req.addr, req.rack, req.capacity, req.used
	s.free, s.disks = req.free, req.disks
	s.chunks = replicaSet{}
	s.doubt, s.again = nil, false
	s.alive, s.lastBeat = true, now
	r.aliveChanged()
	r.recordHeld(s, req.leases, now)
	r.byAddr[req.addr] = s
	return s, known, doubt, nil
}

// inHandleOrder returns the replicas of a report sorted by handle (the
// report itself is left as it is): a replicaSet takes them fastest so,
// at its pages' ends.
func inHandleOrder(chunks []replica) []replica {
	if slices.IsSortedFunc(chunks, cmpReplica) {
		return chunks
	}
	out := slices.Clone(chunks)
	slices.SortStableFunc(out, cmpReplica)
	return out
}

func cmpReplica(a, b replica) int { return cmp.Compare(a.handle, b.handle) }

// askAgain has server id told to register again at its next heartbeat.
func (r *registry) askAgain(id string) {
	if s := r.servers[id]; s != nil {
		s.again = true
	}
}

// beaten is the registry's answer to a heartbeat.
type beaten struct {
	reregister bool
	garbage    []chunkfs.Handle // replicas the server must delete
	verify     []chunkfs.Handle // replicas in doubt to check with the server (verifyDoubts)
	extended   []chunkfs.Handle // leases extended
	adopted    []chunkfs.Handle // leases it reported that the leader adopted (adopt)
}

// heartbeat records a chunkserver's figures and the leases it reports,
// adopts those it can (adopt), checks its sample and corrupt list and
// extends the leases it asks for, by leaseFor from now. A master that does
// not lead (leads false) records the figures and leases and learns the
// sample's replicas at the versions it has applied (learn), and no more:
// its log may lag, so a replica of a chunk it has not applied yet would
// look like garbage, and the deletions it queued would be handed out to
// nobody.
func (r *registry) heartbeat(req beat, version versionOf, now time.Time, leaseFor time.Duration, leads bool) beaten {
	s := r.servers[req.id]
	if s == nil || !s.alive || s.addr != req.addr || s.again {
		return beaten{reregister: true}
	}
	s.capacity, s.used, s.load, s.lastBeat = req.capacity, req.used, req.load, now
	s.free, s.disks = req.free, req.disks
	r.recordHeld(s, req.leases, now)
	r.forgetDeleted(s, req.deleted, now)
	if !leads {
		r.learn(s, req.sample, version)
		return beaten{}
	}
	var out beaten
	out.adopted = r.adoptFrom(s.id, version, now)
	out.garbage, out.verify = r.sample(s, req, version, now)
	out.extended = r.extend(s, req.extend, now, leaseFor)
	return out
}

// forgetDeleted drops the replicas s says it has deleted (and does not
// hold again). The leader mostly knows already — it ordered the deletion —
// but a follower or observer learns it only so, and a deletion ordered by
// a previous leader is news to a new one: without it they would hand the
// replica to readers until s registered again.
func (r *registry) forgetDeleted(s *server, deleted []chunkfs.Handle, now time.Time) {
	for _, h := range deleted {
		if s.chunks.has(h) {
			r.dropReplica(s, h, now)
		}
	}
}

// learn records, on a master that does not lead, each sampled replica at
// the version this master has applied for its chunk: without it a standby
// or observer would know only the replicas a server had when it
// registered, and refuse every look-up of a chunk made since (HDFS-13924's
// hand-off to the leader). It condemns nothing: a replica of a chunk not
// applied yet, or at another version, may be right by the log's head. A
// replica held back (holdLogged, on a master taking over) is not counted.
func (r *registry) learn(s *server, sample []replica, version versionOf) {
	for _, c := range sample {
		if cur, ok := version(c.handle); ok && c.version == cur && s.chunks.at(c.handle) != cur && !r.heldBack(s, c.handle, cur) {
			r.addReplica(s, c.handle, cur)
		}
	}
}

// maxVerifyPerBeat bounds the replicas in doubt one heartbeat checks.
const maxVerifyPerBeat = 16

// sample checks a heartbeat's sample and corrupt list and returns what the
// server should delete, with the garbage queued for it, and the sampled
// replicas in doubt whose old version must be checked with the server
// before they may be condemned.
func (r *registry) sample(s *server, req beat, version versionOf, now time.Time) (garbage []chunkfs.Handle, verify []chunkfs.Handle) {
	for _, h := range req.corrupt {
		if _, ok := version(h); ok {
			r.corrupt(s, h, now)
		} else {
			r.condemn(s, h, now) // its chunk is gone
		}
	}
	for _, c := range req.sample {
		h := c.handle
		cur, ok := version(h)
		known := s.chunks.has(h)
		_, doubted := s.doubt[h]
		// A sample may predate a Lease or Truncate call that raised the
		// replica's version, so an old version condemns only a replica
		// the master does not count; and if that is because its call
		// failed (the call may have reached it anyway), only after the
		// server confirms the old version.
		switch v := c.version; {
		case !ok || (v < cur && !known && !doubted && !r.cloning(h, s)):
			// (An old copy a clone in flight replaces is left to the
			// clone's end, as in register.)
			r.condemn(s, h, now)
			r.back(s, h)
		case v < cur && doubted:
			if len(verify) < maxVerifyPerBeat {
				verify = append(verify, h)
			}
		case v == cur && !known && !r.cloning(h, s) && !s.queued(h) && !r.heldBack(s, h, v):
			// Counted again (after a failed call, or a deletion handed
			// out that did not happen), unless it is condemned and its
			// deletion still queued (the sample predates the condemning,
			// and the server deletes it once told, at this answer) or it
			// left the counted set under a lease (leave).
			r.addReplica(s, h, v)
			r.clearDoubt(s, h)
		}
	}
	return r.takeGarbage(s), verify
}

// takeGarbage hands out (once each) up to maxGarbagePerAnswer of the
// deletions queued for s.
func (r *registry) takeGarbage(s *server) []chunkfs.Handle {
	n := min(len(s.garbage), maxGarbagePerAnswer)
	out := make([]chunkfs.Handle, 0, n)
	seen := make(map[chunkfs.Handle]bool, n)
	for _, h := range s.garbage[:n] {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	s.garbage = s.garbage[n:]
	if len(s.garbage) == 0 {
		s.garbage = nil
	}
	return out
}

// doubtGens returns the doubt generation of each of handles on server id
// (nil when the server is unknown), to tell later whether a doubt was
// settled or raised again meanwhile.
func (r *registry) doubtGens(id string, handles []chunkfs.Handle) []uint64 {
	s := r.servers[id]
	if s == nil {
		return nil
	}
	gens := make([]uint64, len(handles))
	for i, h := range handles {
		gens[i] = s.doubt[h]
	}
	return gens
}

// settle applies what server id at addr said of its replicas in doubt:
// one at the logged version is counted again, one behind it (or of a
// deleted chunk) is garbage and returned, one ahead of the log is left to a
// registration to adopt. A replica the server could not describe, or that a
// later call put in doubt again, stays in doubt.
func (r *registry) settle(id, addr string, handles []chunkfs.Handle, gens []uint64, versions []chunkfs.Version, errs []error, version versionOf, now time.Time) []chunkfs.Handle {
	s := r.servers[id]
	if s == nil || !s.alive || s.addr != addr {
		return nil
	}
	var garbage []chunkfs.Handle
	for i, h := range handles {
		if g, ok := s.doubt[h]; !ok || g != gens[i] {
			continue // settled meanwhile, or in doubt again
		}
		cur, ok := version(h)
		switch v := versions[i]; {
		case errs[i] != nil && chunkfs.KindOf(errs[i]) != chunkfs.KindNotExist:
			continue
		case errs[i] != nil:
			r.clearDoubt(s, h) // the server has no replica
		case !ok || v < cur:
			r.clearDoubt(s, h)
			r.dropReplica(s, h, now)
			r.back(s, h)
			garbage = append(garbage, h)
		case v == cur && r.heldBack(s, h, v):
			r.clearDoubt(s, h) // not counted (leave), nor deleted
		case v == cur:
			r.clearDoubt(s, h)
			r.addReplica(s, h, v)
		default:
			r.clearDoubt(s, h)
		}
	}
	return garbage
}

// corrupt forgets s's replica of h, which failed its checksum (it is
// never counted again), and has s delete it — unless no other live replica
// of h exists: then it is kept on s's disk (s serves it no more), since its
// other blocks may be all that is left of the chunk, and deleted once a
// good copy exists (s lists it as corrupt in every heartbeat until then).
// It reports whether s's replica was counted until now.
func (r *registry) corrupt(s *server, h chunkfs.Handle, now time.Time) bool {
	held := s.chunks.has(h)
	r.dropReplica(s, h, now)
	r.clearDoubt(s, h)
	if held {
		if ci := r.info(h); ci.corrupt < math.MaxUint8 {
			ci.corrupt++
		}
	}
	if r.liveHolders(h) > 0 {
		r.queueGarbage(s, h)
	}
	return held
}

// corruptAt is corrupt for the server at addr, if any is known there.
func (r *registry) corruptAt(addr string, h chunkfs.Handle, now time.Time) bool {
	s := r.byAddr[addr]
	return s != nil && r.corrupt(s, h, now)
}

// liveHolders counts the live servers holding a counted replica of h.
func (r *registry) liveHolders(h chunkfs.Handle) int {
	ci := r.chunks.get(h)
	if ci == nil {
		return 0
	}
	n := 0
	for s := range r.holders(h, ci) {
		if s.alive {
			n++
		}
	}
	return n
}
