package chunkserver

import (
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/chunkstore"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// reporter tells the masters about corrupt replicas: at once by
// ReportCorrupt, and in every heartbeat until the replica is deleted; and
// about deleted replicas, in the next heartbeat to each master (as HDFS's
// incremental block reports): a master that does not lead, told nothing of
// the deletions the leader ordered, would go on handing the replica to
// readers until the server registered again.
type reporter struct {
	s *Server

	mu       sync.Mutex // guards the fields below
	reported map[chunkfs.Handle]bool
	cursor   chunkfs.Handle // last handle of the previous heartbeat sample
	// deleted holds, per master address, the replicas deleted since the
	// last heartbeat that master answered; overflowed marks a master whose
	// list outgrew maxDeletedPending, which is sent a full report instead.
	deleted    map[string][]chunkfs.Handle
	overflowed map[string]bool
}

// maxDeletedPending bounds the deletions kept for one master (the
// master's bound on a heartbeat's lists).
const maxDeletedPending = 100000

func (r *reporter) init(s *Server) {
	r.s, r.reported = s, make(map[chunkfs.Handle]bool)
	r.deleted, r.overflowed = make(map[string][]chunkfs.Handle), make(map[string]bool)
}

// noteDeleted records that the replica of h is gone, for every master.
func (r *reporter) noteDeleted(h chunkfs.Handle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.s.cfg.Masters {
		if r.overflowed[m] {
			continue
		}
		if len(r.deleted[m]) >= maxDeletedPending {
			r.deleted[m], r.overflowed[m] = nil, true
			continue
		}
		r.deleted[m] = append(r.deleted[m], h)
	}
}

// takeDeleted returns the deletions to tell master and forgets them; ok is
// false when some were lost (the list overflowed), so only a full report
// can set the master right.
func (r *reporter) takeDeleted(master string) (hs []chunkfs.Handle, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hs, ok = r.deleted[master], !r.overflowed[master]
	delete(r.deleted, master)
	delete(r.overflowed, master)
	return hs, ok
}

// requeueDeleted puts back deletions a master was not told (its heartbeat
// or registration failed); a full report that did not reach it either
// leaves it as uninformed as before.
func (r *reporter) requeueDeleted(master string, hs []chunkfs.Handle, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ok || r.overflowed[master] || len(hs)+len(r.deleted[master]) > maxDeletedPending {
		r.deleted[master], r.overflowed[master] = nil, true
		return
	}
	r.deleted[master] = append(hs, r.deleted[master]...)
}

// corrupt reports chunk h corrupt to every master, once.
func (r *reporter) corrupt(h chunkfs.Handle) {
	r.mu.Lock()
	first := !r.reported[h]
	r.reported[h] = true
	r.mu.Unlock()
	if !first {
		return
	}
	s := r.s
	s.log.Error("corrupt replica", "chunk", chunkName(h))
	self := s.Addr()
	for _, addr := range s.cfg.Masters {
		s.goBackground(func() {
			ctx, cancel := s.callCtx(s.ctx)
			defer cancel()
			m, err := s.peers.Master(addr)
			if err == nil {
				_, err = m.ReportCorrupt(ctx, &pb.ReportCorruptRequest{Reporter: self, Handle: uint64(h), Replica: self})
			}
			if err != nil {
				s.log.Warn("report corrupt replica", "master", addr, "chunk", chunkName(h), "err", err)
			}
		})
	}
}

// forget drops h once its replica is deleted.
func (r *reporter) forget(h chunkfs.Handle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.reported, h)
}

// sample returns the next n chunks after the cursor, wrapping around.
func (r *reporter) sample(all []chunkstore.Info, n int) []*pb.ChunkReplica {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := 0
	for start < len(all) && all[start].Handle <= r.cursor {
		start++
	}
	var out []*pb.ChunkReplica
	for i := 0; i < min(n, len(all)); i++ {
		in := all[(start+i)%len(all)]
		if !in.Corrupt {
			out = append(out, replica(in))
		}
		r.cursor = in.Handle
	}
	return out
}

func replica(in chunkstore.Info) *pb.ChunkReplica {
	return &pb.ChunkReplica{Handle: uint64(in.Handle), Version: uint64(in.Version), Length: in.Length}
}

// heartbeatLoop registers with one master, then heartbeats to it every
// interval, until the server closes. When the master asks for a new
// registration (a restarted master knows no chunkserver), the server
// registers at once rather than a tick later: a restarted master waits in
// safe mode for the replicas; a registration that fails is tried again
// at the next tick. A request with a token of a key not held yet also
// brings the next heartbeat forward (tokenKeys).
func (s *Server) heartbeatLoop(master string) {
	t := s.cfg.Clock.NewTicker(s.cfg.HeartbeatInterval)
	defer t.Stop()
	registered := false
	for {
		if registered {
			registered = s.heartbeat(master)
		}
		if !registered {
			registered = s.register(master) == nil
		}
		select {
		case <-t.C():
		case <-s.keys.wanted(): // a request holds a token of a key not held yet
		case <-s.ctx.Done():
			return
		}
	}
}

// register sends a full chunk report (corrupt replicas left out), which
// supersedes the deletions not yet told to master.
func (s *Server) register(master string) error {
	deleted, complete := s.reporter.takeDeleted(master)
	sp := s.space()
	req := &pb.RegisterRequest{Id: s.id, Addr: s.Addr(), Rack: s.cfg.Rack,
		Capacity: sp.capacity, Used: sp.used, Free: sp.free, Disks: sp.disks,
		Leases: s.heldLeases(s.cfg.Clock.Now()), BytesRead: s.traffic.read.Load(), BytesWritten: s.traffic.written.Load()}
	for _, in := range s.store.List() {
		if !in.Corrupt {
			req.Chunks = append(req.Chunks, replica(in))
		}
	}
	ctx, cancel := s.callCtx(s.ctx)
	defer cancel()
	asks := s.keys.sending()
	m, err := s.peers.Master(master)
	if err != nil {
		s.learnKeys(master, asks, nil) // no keys from this one: waiters need not wait for it
		s.reporter.requeueDeleted(master, deleted, complete)
		return err
	}
	resp, err := m.Register(ctx, req)
	if err != nil {
		s.learnKeys(master, asks, nil) // no keys from this one: waiters need not wait for it
		s.reporter.requeueDeleted(master, deleted, complete)
		s.log.Warn("register with master", "master", master, "err", err)
		s.redialIfUnreachable(master, err)
		return err
	}
	s.log.Info("registered with master", "master", master, "chunks", len(req.Chunks))
	s.learnKeys(master, asks, resp.TokenKeys)
	s.deleteAll(append(resp.Garbage, resp.Stale...))
	return nil
}

// redialIfUnreachable drops the connection to master after a call that
// reached no server (the master is down or restarting), so that the next
// heartbeat dials afresh. Kept, the connection would retry only after
// gRPC's exponential back-off (up to two minutes), every call failing at
// once meanwhile though the master was back: after a master restart the
// chunkservers registered up to seconds late, and the master stayed
// without them, in safe mode or healing on the few that had.
func (s *Server) redialIfUnreachable(master string, err error) {
	if rpc.Unreachable(err) {
		s.peers.Forget(master)
	}
}

// spaceReport is what a chunkserver tells the master of its space.
type spaceReport struct {
	capacity, free int64 // of its distinct disks
	used           int64 // bytes of chunk data held
	disks          []*pb.Disk
}

// space reports the server's disks and the bytes of chunk data held.
func (s *Server) space() spaceReport {
	r := spaceReport{used: s.store.Used()}
	disks, err := s.store.Disks()
	if err != nil {
		s.log.Warn("disk space", "err", err)
	}
	for _, d := range disks {
		r.capacity += d.Total
		r.free += d.Free
		r.disks = append(r.disks, &pb.Disk{Id: d.ID, Capacity: d.Total, Free: d.Free})
	}
	return r
}

// heartbeat sends one heartbeat; it returns false if the master wants a
// new registration.
func (s *Server) heartbeat(master string) bool {
	sent := s.cfg.Clock.Now()
	deleted, complete := s.reporter.takeDeleted(master)
	if !complete {
		return false // deletions were lost: register again with a full report
	}
	req := s.heartbeatRequest(deleted)
	ctx, cancel := s.callCtx(s.ctx)
	defer cancel()
	asks := s.keys.sending()
	m, err := s.peers.Master(master)
	if err != nil {
		s.learnKeys(master, asks, nil) // no keys from this one: waiters need not wait for it
		s.reporter.requeueDeleted(master, deleted, true)
		return true
	}
	resp, err := m.Heartbeat(ctx, req)
	if err != nil {
		s.learnKeys(master, asks, nil) // no keys from this one: waiters need not wait for it
		s.reporter.requeueDeleted(master, deleted, true)
		s.log.Warn("heartbeat", "master", master, "err", err)
		s.redialIfUnreachable(master, err)
		return true
	}
	s.learnKeys(master, asks, resp.TokenKeys)
	s.deleteAll(resp.Garbage)
	s.extendLeases(resp.Extended, sent, time.Duration(resp.LeaseMs)*time.Millisecond)
	return !resp.Reregister
}

// heartbeatRequest builds a heartbeat telling the replicas in deleted gone,
// except those held again since (a clone of the chunk arrived after).
func (s *Server) heartbeatRequest(deleted []chunkfs.Handle) *pb.HeartbeatRequest {
	sp := s.space()
	all := s.store.List()
	req := &pb.HeartbeatRequest{Id: s.id, Addr: s.Addr(), Capacity: sp.capacity, Used: sp.used,
		Free: sp.free, Disks: sp.disks, Load: s.load.Load(),
		Sample: s.reporter.sample(all, s.cfg.ReportSize), BytesRead: s.traffic.read.Load(), BytesWritten: s.traffic.written.Load()}
	if len(deleted) > 0 {
		held := make(map[chunkfs.Handle]bool, len(all))
		for _, in := range all {
			held[in.Handle] = true
		}
		for _, h := range deleted {
			if !held[h] {
				req.Deleted = append(req.Deleted, uint64(h))
			}
		}
	}
	now := s.cfg.Clock.Now()
	req.Leases = s.heldLeases(now)
	for _, in := range all {
		if in.Corrupt {
			req.Corrupt = append(req.Corrupt, uint64(in.Handle))
			continue
		}
		s.mu.Lock()
		st := s.chunks[in.Handle]
		s.mu.Unlock()
		if st != nil && st.takeMutated(now) {
			req.ExtendLeases = append(req.ExtendLeases, uint64(in.Handle))
		}
	}
	return req
}

// extendLeases extends the leases the master agreed to extend, counting
// from when the heartbeat was sent (the master's grant cannot be older).
func (s *Server) extendLeases(handles []uint64, sent time.Time, d time.Duration) {
	if d <= 0 {
		return
	}
	for _, h := range handles {
		s.mu.Lock()
		st := s.chunks[chunkfs.Handle(h)]
		s.mu.Unlock()
		if st != nil {
			st.extend(sent, sent.Add(d))
		}
	}
}

// deleteAll deletes the replicas a master says are garbage or stale.
func (s *Server) deleteAll(handles []uint64) {
	for _, h := range handles {
		if err := s.deleteChunk(chunkfs.Handle(h)); err != nil {
			s.log.Warn("delete chunk", "chunk", chunkName(chunkfs.Handle(h)), "err", err)
		}
	}
}

// housekeeping drops expired pushed data and verifies one chunk per scrub
// interval, so a replica rotting on disk is found even if nobody reads it.
func (s *Server) housekeeping() {
	every := s.cfg.ScrubInterval
	if every == 0 {
		every = s.cfg.BufferExpiry
	}
	t := s.cfg.Clock.NewTicker(min(every, s.cfg.BufferExpiry))
	defer t.Stop()
	var next chunkfs.Handle
	last := s.cfg.Clock.Now()
	for {
		select {
		case <-t.C():
		case <-s.ctx.Done():
			return
		}
		s.buf.expire()
		if now := s.cfg.Clock.Now(); s.cfg.ScrubInterval > 0 && now.Sub(last) >= s.cfg.ScrubInterval {
			last = now
			next = s.scrubAfter(next)
			s.traffic.scrubbedTo(next)
		}
	}
}

// scrubAfter verifies the first chunk after h (wrapping) and returns it.
func (s *Server) scrubAfter(h chunkfs.Handle) chunkfs.Handle {
	all := s.store.List()
	if len(all) == 0 {
		return 0
	}
	in := all[0]
	for _, c := range all {
		if c.Handle > h {
			in = c
			break
		}
	}
	if in.Corrupt {
		return in.Handle
	}
	if err := s.store.Verify(in.Handle); chunkfs.KindOf(err) == chunkfs.KindChecksum {
		s.reporter.corrupt(in.Handle)
	}
	return in.Handle
}
