package chunkserver

import (
	"context"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/chunkstore"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/token"
)

// serverReport is what every registration and heartbeat tells a master of
// this server.
type serverReport struct {
	ID, Addr      string
	Cluster       string // the cluster joined ("" before the first registration)
	Space         spaceReport
	Leases        []heldLease // held as primary
	Read, Written int64       // data-stream bytes served and received since start
}

// registration is a full report: every replica held (corrupt ones left
// out).
type registration struct {
	serverReport
	Rack   string
	Chunks []chunkstore.Info
}

// heartbeat is a periodic report: a rotating sample of the replicas held,
// the leases to extend, corrupt replicas and those deleted since the last
// heartbeat the master answered.
type heartbeat struct {
	serverReport
	Load                     int32 // operations in flight
	Sample                   []chunkstore.Info
	Extend, Corrupt, Deleted []chunkfs.Handle
}

// masterAnswer is what a master answers a registration or heartbeat.
type masterAnswer struct {
	Keys       []token.Key      // the token keys now valid
	Garbage    []chunkfs.Handle // replicas to delete (garbage or stale)
	Reregister bool             // send a full report
	Extended   []chunkfs.Handle // leases extended by LeaseTerm
	LeaseTerm  time.Duration
	Cluster    string // a registration's: the master's cluster ID ("" if it has none yet)
}

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
			m, err := s.master(addr)
			if err == nil {
				err = m.reportCorrupt(ctx, self, h)
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
func (r *reporter) sample(all []chunkstore.Info, n int) []chunkstore.Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := 0
	for start < len(all) && all[start].Handle <= r.cursor {
		start++
	}
	var out []chunkstore.Info
	for i := 0; i < min(n, len(all)); i++ {
		in := all[(start+i)%len(all)]
		if !in.Corrupt {
			out = append(out, in)
		}
		r.cursor = in.Handle
	}
	return out
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
	reg := registration{serverReport: s.serverReport(s.cfg.Clock.Now()), Rack: s.cfg.Rack}
	for _, in := range s.store.List() {
		if !in.Corrupt {
			reg.Chunks = append(reg.Chunks, in)
		}
	}
	resp, err := s.tell(master, "register with master", deleted, complete, func(ctx context.Context, m masterLink) (masterAnswer, error) {
		return m.register(ctx, reg)
	})
	if err != nil {
		return err
	}
	if err := s.joinCluster(resp.Cluster); err != nil {
		s.log.Error("refusing a master of another cluster; nothing deleted", "master", master, "err", err)
		return err
	}
	s.log.Info("registered with master", "master", master, "chunks", len(reg.Chunks))
	s.deleteAll(resp.Garbage)
	return nil
}

// tell makes call to master with a deadline and takes the token keys of
// its answer (none when it fails: waiters for keys need not wait for this
// master). When it fails, the
// deletions it carried are put back for the next report (complete false:
// some were lost already), and a call that reached the master's address
// is logged as what and, if no server answered there, redialled at the
// next call.
func (s *Server) tell(master, what string, deleted []chunkfs.Handle, complete bool, call func(context.Context, masterLink) (masterAnswer, error)) (masterAnswer, error) {
	ctx, cancel := s.callCtx(s.ctx)
	defer cancel()
	asks := s.keys.sending()
	m, err := s.master(master)
	if err != nil {
		s.learnKeys(master, asks, nil) // no keys from this one: waiters need not wait for it
		s.reporter.requeueDeleted(master, deleted, complete)
		return masterAnswer{}, err
	}
	resp, err := call(ctx, m)
	if err != nil {
		s.learnKeys(master, asks, nil) // no keys from this one: waiters need not wait for it
		s.reporter.requeueDeleted(master, deleted, complete)
		s.log.Warn(what, "master", master, "err", err)
		s.redialIfUnreachable(master, err)
		return masterAnswer{}, err
	}
	s.learnKeys(master, asks, resp.Keys)
	return resp, nil
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
	disks          []chunkstore.Disk
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
		r.disks = append(r.disks, d)
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
	b := s.heartbeatReport(deleted)
	resp, err := s.tell(master, "heartbeat", deleted, true, func(ctx context.Context, m masterLink) (masterAnswer, error) {
		return m.heartbeat(ctx, b)
	})
	if err != nil {
		return true
	}
	s.deleteAll(resp.Garbage)
	s.extendLeases(resp.Extended, sent, resp.LeaseTerm)
	return !resp.Reregister
}

// serverReport is what this server tells every master of itself at now.
func (s *Server) serverReport(now time.Time) serverReport {
	return serverReport{ID: s.id, Addr: s.Addr(), Cluster: s.clusterID(), Space: s.space(), Leases: s.heldLeases(now),
		Read: s.traffic.read.Load(), Written: s.traffic.written.Load()}
}

// heartbeatReport builds a heartbeat telling the replicas in deleted gone,
// except those held again since (a clone of the chunk arrived after).
func (s *Server) heartbeatReport(deleted []chunkfs.Handle) heartbeat {
	now := s.cfg.Clock.Now()
	all := s.store.List()
	b := heartbeat{serverReport: s.serverReport(now), Load: s.load.Load(), Sample: s.reporter.sample(all, s.cfg.ReportSize)}
	if len(deleted) > 0 {
		held := make(map[chunkfs.Handle]bool, len(all))
		for _, in := range all {
			held[in.Handle] = true
		}
		for _, h := range deleted {
			if !held[h] {
				b.Deleted = append(b.Deleted, h)
			}
		}
	}
	for _, in := range all {
		if in.Corrupt {
			b.Corrupt = append(b.Corrupt, in.Handle)
			continue
		}
		s.mu.Lock()
		st := s.chunks[in.Handle]
		s.mu.Unlock()
		if st != nil && st.takeMutated(now) {
			b.Extend = append(b.Extend, in.Handle)
		}
	}
	return b
}

// extendLeases extends the leases the master agreed to extend, counting
// from when the heartbeat was sent (the master's grant cannot be older).
func (s *Server) extendLeases(handles []chunkfs.Handle, sent time.Time, d time.Duration) {
	if d <= 0 {
		return
	}
	for _, h := range handles {
		s.mu.Lock()
		st := s.chunks[h]
		s.mu.Unlock()
		if st != nil {
			st.extend(sent, sent.Add(d))
		}
	}
}

// deleteAll deletes the replicas a master says are garbage or stale.
func (s *Server) deleteAll(handles []chunkfs.Handle) {
	for _, h := range handles {
		if err := s.deleteChunk(h); err != nil {
			s.log.Warn("delete chunk", "chunk", chunkName(h), "err", err)
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
