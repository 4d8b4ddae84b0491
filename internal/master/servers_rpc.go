package master

import (
	"context"
	"maps"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Bounds on chunkserver input.
const (
	maxIDLen       = 256
	maxAddrLen     = 512
	maxListInBeat  = 100000 // sample, extend_leases and corrupt entries per heartbeat
	maxReportLen   = 1 << 22
	maxServerCount = 10000
)

func checkServerArgs(op, id, addr, rack string) error {
	switch {
	case id == "" || len(id) > maxIDLen:
		return chunkfs.E(op, "", chunkfs.KindInvalid, "chunkserver ID empty or too long")
	case addr == "" || len(addr) > maxAddrLen:
		return chunkfs.E(op, id, chunkfs.KindInvalid, "chunkserver address empty or too long")
	case len(rack) > maxIDLen:
		return chunkfs.E(op, id, chunkfs.KindInvalid, "rack name too long")
	}
	return nil
}

// Register takes a chunkserver's full report: its replicas become the
// master's record of where they live, replacing what it held before.
// Replicas of chunks the master does not know are garbage; replicas with an
// older version than the master's are stale.
//
// A report may have been built before a Lease or Truncate call raised a
// replica's version and be handled after the new version was logged. So a
// reported version below what the master recorded for that server (from a
// call that succeeded) counts as the recorded one, and a replica whose call
// failed (in doubt) is not made stale by an old report: the next heartbeat
// sample that covers it settles it by asking the server (verifyDoubts).
func (m *Master) Register(ctx context.Context, req *pb.RegisterRequest) (*pb.RegisterResponse, error) {
	if err := checkServerArgs("register", req.Id, req.Addr, req.Rack); err != nil {
		return nil, err
	}
	if len(req.Chunks) > maxReportLen {
		return nil, chunkfs.E("register", req.Id, chunkfs.KindTooLarge, "chunk report too long")
	}
	resp := &pb.RegisterResponse{HeartbeatIntervalMs: m.cfg.HeartbeatInterval.Milliseconds()}
	var err error
	var ahead []namespace.Chunk
	resp.StateId = m.state.read(func(ns *namespace.Namespace) {
		m.reg.mu.Lock()
		defer m.reg.mu.Unlock()
		var s *server
		var known map[chunkfs.Handle]chunkfs.Version
		var doubt map[chunkfs.Handle]uint64
		if s, known, doubt, err = m.registerLocked(req); err != nil {
			return
		}
		for _, c := range req.Chunks {
			h, v := chunkfs.Handle(c.Handle), chunkfs.Version(c.Version)
			v = max(v, known[h]) // the report may predate a call that raised it
			cur, ok := ns.ChunkVersion(h)
			switch {
			case !ok:
				resp.Garbage = append(resp.Garbage, c.Handle)
			case v < cur && doubt[h] != 0:
				m.reg.doubtLocked(s, h)
			case v < cur:
				resp.Stale = append(resp.Stale, c.Handle)
			case chunkfs.Version(c.Version) > cur:
				ahead = append(ahead, namespace.Chunk{Handle: h, Version: v})
				fallthrough
			default:
				m.reg.addReplicaLocked(s, h, v)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if id, err := m.adopt(context.WithoutCancel(ctx), ahead); err != nil {
		return nil, err
	} else if id > 0 {
		resp.StateId = id
	}
	m.cfg.Logger.Info("chunkserver registered", "id", req.Id, "addr", req.Addr, "chunks", len(req.Chunks), "garbage", len(resp.Garbage), "stale", len(resp.Stale))
	return resp, nil
}

// adopt logs the versions of replicas that are ahead of the log: the master
// told them a new version and stopped before logging it, so theirs is the
// current one (replicas left behind become stale).
func (m *Master) adopt(ctx context.Context, ahead []namespace.Chunk) (uint64, error) {
	var id uint64
	for _, ch := range ahead {
		mu := &m.leaseMu[handleStripe(ch.Handle)]
		mu.Lock()
		_, idx, err := m.apply(ctx, &namespace.Command{Op: namespace.OpSetVersion, Handle: ch.Handle, Length: int64(ch.Version)})
		mu.Unlock()
		if err != nil && chunkfs.KindOf(err) != chunkfs.KindNotExist {
			return 0, err
		}
		m.cfg.Logger.Info("adopted a replica's newer chunk version", "handle", ch.Handle, "version", ch.Version)
		id = max(id, idx)
	}
	return id, nil
}

// registerLocked creates or resets the record of the server in req. It
// returns what the master recorded for that server before: the versions of
// its replicas and the replicas in doubt.
func (m *Master) registerLocked(req *pb.RegisterRequest) (*server, map[chunkfs.Handle]chunkfs.Version, map[chunkfs.Handle]uint64, error) {
	r := m.reg
	var known map[chunkfs.Handle]chunkfs.Version
	var doubt map[chunkfs.Handle]uint64
	if s := r.servers[req.Id]; s != nil {
		known, doubt = maps.Clone(s.chunks), s.doubt
		r.dropServerLocked(s)
		delete(r.byAddr, s.addr)
	} else if len(r.servers) >= maxServerCount {
		return nil, nil, nil, chunkfs.E("register", req.Id, chunkfs.KindNoSpace, "too many chunkservers")
	}
	if old := r.byAddr[req.Addr]; old != nil && old.id != req.Id {
		old.alive = false
		r.dropServerLocked(old)
		delete(r.servers, old.id)
	}
	s := r.servers[req.Id]
	if s == nil {
		s = &server{id: req.Id}
		r.servers[req.Id] = s
	}
	s.addr, s.rack, s.capacity, s.used = req.Addr, req.Rack, req.Capacity, req.Used
	s.free, s.disks = req.Free, disksFrom(req.Disks)
	s.chunks = make(map[chunkfs.Handle]chunkfs.Version, len(req.Chunks))
	s.doubt = nil
	s.alive, s.lastBeat = true, m.cfg.Clock.Now()
	r.byAddr[req.Addr] = s
	return s, known, doubt, nil
}

// Heartbeat records a chunkserver's figures, answers its sample with the
// replicas it should delete, and extends the leases it asks for.
func (m *Master) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	if err := checkServerArgs("heartbeat", req.Id, req.Addr, ""); err != nil {
		return nil, err
	}
	if len(req.Sample) > maxListInBeat || len(req.ExtendLeases) > maxListInBeat || len(req.Corrupt) > maxListInBeat {
		return nil, chunkfs.E("heartbeat", req.Id, chunkfs.KindTooLarge, "heartbeat lists too long")
	}
	now := m.cfg.Clock.Now()
	if len(req.ExtendLeases) > 0 {
		if err := m.ensureHorizon(ctx, now.Add(m.cfg.LeaseDuration+m.leaseSlack())); err != nil {
			return nil, err
		}
	}
	resp := &pb.HeartbeatResponse{LeaseMs: m.cfg.LeaseDuration.Milliseconds()}
	var verify []chunkfs.Handle
	resp.StateId = m.state.read(func(ns *namespace.Namespace) {
		m.reg.mu.Lock()
		defer m.reg.mu.Unlock()
		s := m.reg.servers[req.Id]
		if s == nil || !s.alive || s.addr != req.Addr {
			resp.Reregister = true
			return
		}
		s.capacity, s.used, s.load, s.lastBeat = req.Capacity, req.Used, req.Load, now
		s.free, s.disks = req.Free, disksFrom(req.Disks)
		resp.Garbage, verify = m.sampleLocked(ns, s, req)
		resp.Extended = m.extendLocked(s, req.ExtendLeases, now)
	})
	if len(verify) > 0 {
		resp.Garbage = append(resp.Garbage, m.verifyDoubts(ctx, req.Id, req.Addr, verify)...)
	}
	return resp, nil
}

// maxVerifyPerBeat bounds the replicas in doubt one heartbeat checks.
const maxVerifyPerBeat = 16

// sampleLocked checks a heartbeat's sample and corrupt list and returns
// what the server should delete, with the garbage queued for it, and the
// sampled replicas in doubt whose old version must be checked with the
// server before they may be condemned.
func (m *Master) sampleLocked(ns *namespace.Namespace, s *server, req *pb.HeartbeatRequest) (garbage []uint64, verify []chunkfs.Handle) {
	r := m.reg
	for _, h := range req.Corrupt {
		r.dropReplicaLocked(s, chunkfs.Handle(h))
		r.clearDoubtLocked(s, chunkfs.Handle(h))
		r.queueGarbageLocked(s, chunkfs.Handle(h))
	}
	for _, c := range req.Sample {
		h := chunkfs.Handle(c.Handle)
		cur, ok := ns.ChunkVersion(h)
		_, known := s.chunks[h]
		_, doubted := s.doubt[h]
		// A sample may predate a Lease or Truncate call that raised the
		// replica's version, so an old version condemns only a replica
		// the master does not count; and if that is because its call
		// failed (the call may have reached it anyway), only after the
		// server confirms the old version.
		switch v := chunkfs.Version(c.Version); {
		case !ok || (v < cur && !known && !doubted):
			r.dropReplicaLocked(s, h)
			r.clearDoubtLocked(s, h)
			r.queueGarbageLocked(s, h)
		case v < cur && doubted:
			if len(verify) < maxVerifyPerBeat {
				verify = append(verify, h)
			}
		case v == cur && !known:
			r.addReplicaLocked(s, h, v) // counted again (after a failed call, say)
			r.clearDoubtLocked(s, h)
		}
	}
	n := min(len(s.garbage), maxGarbagePerAnswer)
	out := make([]uint64, 0, n)
	seen := make(map[chunkfs.Handle]bool, n)
	for _, h := range s.garbage[:n] {
		if !seen[h] {
			seen[h] = true
			out = append(out, uint64(h))
		}
	}
	s.garbage = s.garbage[n:]
	if len(s.garbage) == 0 {
		s.garbage = nil
	}
	return out, verify
}

// verifyDoubts asks the server (id at addr) for the version of each of its
// replicas in doubt in handles and settles them: one at the logged version
// is counted again, one behind it (or of a deleted chunk) is garbage and
// returned, one ahead of the log is left to a registration to adopt. A
// replica the server cannot describe, or that a later call put in doubt
// again, stays in doubt.
func (m *Master) verifyDoubts(ctx context.Context, id, addr string, handles []chunkfs.Handle) []uint64 {
	m.reg.mu.Lock()
	var gens []uint64
	if s := m.reg.servers[id]; s != nil {
		for _, h := range handles {
			gens = append(gens, s.doubt[h])
		}
	}
	m.reg.mu.Unlock()
	if gens == nil {
		return nil
	}
	versions := make([]chunkfs.Version, len(handles))
	errs := make([]error, len(handles))
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RPCTimeout) // for all of them: the heartbeat waits
	defer cancel()
	for i, h := range handles {
		versions[i], errs[i] = m.replicaVersion(ctx, addr, h)
	}
	var garbage []uint64
	m.state.read(func(ns *namespace.Namespace) {
		m.reg.mu.Lock()
		defer m.reg.mu.Unlock()
		s := m.reg.servers[id]
		if s == nil || !s.alive || s.addr != addr {
			return
		}
		for i, h := range handles {
			if g, ok := s.doubt[h]; !ok || g != gens[i] {
				continue // settled meanwhile, or in doubt again
			}
			cur, ok := ns.ChunkVersion(h)
			switch v := versions[i]; {
			case errs[i] != nil && chunkfs.KindOf(errs[i]) != chunkfs.KindNotExist:
				continue
			case errs[i] != nil:
				m.reg.clearDoubtLocked(s, h) // the server has no replica
			case !ok || v < cur:
				m.reg.clearDoubtLocked(s, h)
				m.reg.dropReplicaLocked(s, h)
				garbage = append(garbage, uint64(h))
			case v == cur:
				m.reg.clearDoubtLocked(s, h)
				m.reg.addReplicaLocked(s, h, v)
			default:
				m.reg.clearDoubtLocked(s, h)
			}
		}
	})
	return garbage
}

// replicaVersion asks the chunkserver at addr for its replica's version.
func (m *Master) replicaVersion(ctx context.Context, addr string, h chunkfs.Handle) (chunkfs.Version, error) {
	cs, err := m.pool.ChunkServer(addr)
	if err != nil {
		return 0, err
	}
	resp, err := cs.ChunkInfo(ctx, &pb.ChunkInfoRequest{Handle: uint64(h)})
	if err != nil {
		return 0, err
	}
	return chunkfs.Version(resp.Version), nil
}

// extendLocked extends the valid leases s holds among handles.
func (m *Master) extendLocked(s *server, handles []uint64, now time.Time) []uint64 {
	var out []uint64
	for _, h := range handles {
		ci := m.reg.chunks[chunkfs.Handle(h)]
		if ci != nil && ci.primary == s && now.Before(ci.expiry) {
			ci.expiry = now.Add(m.cfg.LeaseDuration + m.leaseSlack())
			out = append(out, h)
		}
	}
	return out
}

// ReportCorrupt forgets a replica that failed its checksum and tells its
// server to delete it.
func (m *Master) ReportCorrupt(ctx context.Context, req *pb.ReportCorruptRequest) (*pb.ReportCorruptResponse, error) {
	if len(req.Replica) > maxAddrLen || len(req.Reporter) > maxAddrLen {
		return nil, chunkfs.E("report corrupt", "", chunkfs.KindInvalid, "address too long")
	}
	m.reg.mu.Lock()
	if s := m.reg.byAddr[req.Replica]; s != nil {
		h := chunkfs.Handle(req.Handle)
		if _, ok := s.chunks[h]; ok {
			m.reg.dropReplicaLocked(s, h)
			m.reg.clearDoubtLocked(s, h)
			m.reg.queueGarbageLocked(s, h)
			m.cfg.Logger.Warn("corrupt replica reported", "handle", req.Handle, "replica", req.Replica, "reporter", req.Reporter)
		}
	}
	m.reg.mu.Unlock()
	return &pb.ReportCorruptResponse{StateId: m.state.stateID()}, nil
}

// ClusterReport summarises chunkservers and the namespace.
func (m *Master) ClusterReport(ctx context.Context, req *pb.ClusterReportRequest) (*pb.ClusterReportResponse, error) {
	resp := &pb.ClusterReportResponse{}
	now := m.cfg.Clock.Now()
	resp.StateId = m.state.read(func(ns *namespace.Namespace) {
		c := ns.Counts()
		resp.Files, resp.Directories, resp.Chunks, resp.Bytes, resp.ChunkSize = c.Files, c.Dirs, c.Chunks, c.Bytes, ns.ChunkSize()
		m.reg.mu.Lock()
		defer m.reg.mu.Unlock()
		ns.EachChunk(func(h chunkfs.Handle, v chunkfs.Version, repl int) {
			if len(m.reg.replicasLocked(h, v)) < repl {
				resp.UnderReplicated++
			}
		})
		for _, s := range m.reg.sortedLocked() {
			resp.Servers = append(resp.Servers, &pb.ChunkServerStatus{
				Id: s.id, Addr: s.addr, Rack: s.rack, Capacity: s.capacity, Used: s.used, Load: s.load,
				Chunks: int64(len(s.chunks)), Alive: s.alive, LastHeartbeatMs: now.Sub(s.lastBeat).Milliseconds(),
				Free: s.free, Disks: disksTo(s.disks),
			})
		}
	})
	return resp, nil
}

// livenessLoop declares chunkservers dead when they fall silent.
func (m *Master) livenessLoop() {
	defer m.bg.Done()
	t := m.cfg.Clock.NewTicker(m.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C():
			m.checkLiveness()
		}
	}
}

// checkLiveness marks servers silent for DeadAfter dead; their replicas are
// forgotten until they register again.
func (m *Master) checkLiveness() {
	m.reg.mu.Lock()
	dead := m.reg.markDeadLocked(m.cfg.Clock.Now(), m.cfg.DeadAfter)
	m.reg.mu.Unlock()
	for _, s := range dead {
		m.cfg.Logger.Warn("chunkserver dead", "id", s.id, "addr", s.addr)
	}
}

// collect forgets chunks that became garbage; their servers are told to
// delete them at their next heartbeat.
func (m *Master) collect(handles []chunkfs.Handle) {
	if len(handles) > 0 {
		m.reg.forget(handles)
	}
}
