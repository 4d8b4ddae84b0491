package master

import (
	"context"
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Bounds on chunkserver input.
const (
	maxIDLen       = 256
	maxAddrLen     = 512
	maxListInBeat  = 100000 // sample, extend_leases, corrupt, leases and deleted entries per heartbeat
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

// Register takes a chunkserver's full report (registry.register says
// which replicas count, which are garbage or stale, and which are ahead of
// the log), logs the versions of those ahead, and drops the master's
// connection to a server that registers again, so that calls to it are
// redialled at once.
func (m service) Register(ctx context.Context, req *pb.RegisterRequest) (*pb.RegisterResponse, error) {
	if err := checkServerArgs("register", req.Id, req.Addr, req.Rack); err != nil {
		return nil, err
	}
	if err := checkTraffic("register", req.Id, req.BytesRead, req.BytesWritten); err != nil {
		return nil, err
	}
	if len(req.Chunks) > maxReportLen || len(req.Leases) > maxReportLen {
		return nil, chunkfs.E("register", req.Id, chunkfs.KindTooLarge, "chunk report too long")
	}
	cluster, err := m.sameCluster("register", req.Id, req.ClusterId)
	if err != nil {
		return nil, err
	}
	resp := &pb.RegisterResponse{HeartbeatIntervalMs: m.cfg.HeartbeatInterval.Milliseconds(), TokenKeys: keysTo(m.keysFor()), ClusterId: cluster}
	d, id, err := m.register(reportFrom(req), cluster)
	if err != nil {
		return nil, err
	}
	resp.StateId = id
	m.traffic.note(req.Id, req.BytesRead, req.BytesWritten)
	if d.redial != "" {
		m.pool.Forget(d.redial)
	}
	m.updateSafeMode(false)
	if !m.leads() {
		// Only the leader decides what a chunkserver deletes or which
		// versions are adopted: this master's state may lag the log.
		// Replicas ahead of it are counted by no one until their version
		// is logged, so the server is asked to register again (a master
		// just started leads a moment later; a follower's log catches up
		// with the leader's adoption).
		if len(d.ahead) > 0 {
			m.regMu.Lock()
			m.reg.askAgain(req.Id)
			m.regMu.Unlock()
		}
		return resp, nil
	}
	resp.Garbage, resp.Stale = handlesTo(d.garbage), handlesTo(d.stale)
	if id, err := m.adopt(context.WithoutCancel(ctx), d.ahead); err != nil {
		return nil, err
	} else if id > 0 {
		resp.StateId = id
	}
	m.cfg.Logger.Info("chunkserver registered", "id", req.Id, "addr", req.Addr, "chunks", len(req.Chunks), "garbage", len(resp.Garbage), "stale", len(resp.Stale))
	return resp, nil
}

// register has the registry take rep, a full report from a server of
// cluster, and returns its answer with the state ID it was decided at.
// Like heartbeat, it reads the versions of the chunks rep names (its
// replicas and its leases) under the state lock, then takes the registry
// lock alone (registerAt). Registrations go in one at a time (reportMu),
// so a metadata call waiting for the registry lock waits behind one at
// most, and the versions read are seldom stale by the time the registry
// lock is taken.
func (m *Master) register(rep fullReport, cluster string) (registered, uint64, error) {
	rep.chunks = inHandleOrder(rep.chunks) // sorted once, for versionsFor and the registry
	m.reportMu.Lock()
	defer m.reportMu.Unlock()
	handles := make([]chunkfs.Handle, len(rep.chunks))
	for i, c := range rep.chunks {
		handles[i] = c.handle
	}
	leased := make([]chunkfs.Handle, len(rep.leases))
	for i, l := range rep.leases {
		leased[i] = l.handle
	}
	vs, id := m.state.versionsFor(handles, leased)
	return m.registerAt(rep, cluster, vs, id)
}

// registerAt has the registry take rep at the versions vs, read at state
// ID id, under the registry lock alone if no chunk command was applied
// since they were read (state.current). Else it decides under both locks
// on the namespace as it is, as a registration did before: a chunk deleted
// or given a new version meanwhile is judged by the log, not by vs.
func (m *Master) registerAt(rep fullReport, cluster string, vs versions, id uint64) (registered, uint64, error) {
	m.regMu.Lock()
	if m.state.current(vs) {
		defer m.regMu.Unlock()
		d, err := m.registerLocked(rep, cluster, vs.cluster, vs.version)
		return d, id, err
	}
	m.regMu.Unlock()
	return m.registerHolding(rep, cluster)
}

// registerHolding has the registry take rep holding the state read lock
// throughout, and the registry lock inside it.
func (m *Master) registerHolding(rep fullReport, cluster string) (registered, uint64, error) {
	var d registered
	var err error
	id := m.state.read(func(ns *namespace.Namespace) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		d, err = m.registerLocked(rep, cluster, ns.ClusterID(), ns.ChunkVersion)
	})
	return d, id, err
}

// registerLocked has the registry take rep, from a server of cluster,
// given the logged cluster ID and version. The caller holds regMu, and
// the state lock or versions that are current.
func (m *Master) registerLocked(rep fullReport, cluster, logged string, version versionOf) (registered, error) {
	if logged != cluster {
		return registered{}, chunkfs.E("register", rep.id, chunkfs.KindUnavailable, "the master's cluster ID changed; register again")
	}
	now := m.cfg.Clock.Now()
	d, err := m.reg.register(rep, m.reg.withCopies(version), now)
	if err == nil && m.leads() {
		m.reg.adoptFrom(rep.id, version, now)
	}
	return d, err
}

// adopt logs the versions of replicas that are ahead of the log: the master
// told them a new version and stopped before logging it, so theirs is the
// current one (replicas left behind become stale).
func (m *Master) adopt(ctx context.Context, ahead []namespace.Chunk) (uint64, error) {
	var id uint64
	for _, ch := range ahead {
		mu := &m.leaseMu[handleStripe(ch.Handle)]
		mu.Lock()
		_, idx, err := m.apply(ctx, &namespace.Command{Op: namespace.OpSetVersion, Handle: ch.Handle, Version: ch.Version})
		mu.Unlock()
		if err != nil && chunkfs.KindOf(err) != chunkfs.KindNotExist {
			return 0, err
		}
		m.cfg.Logger.Info("adopted a replica's newer chunk version", "handle", ch.Handle, "version", ch.Version)
		id = max(id, idx)
	}
	return id, nil
}

// Heartbeat records a chunkserver's figures, answers its sample with the
// replicas it should delete, and extends the leases it asks for.
func (m service) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	if err := checkServerArgs("heartbeat", req.Id, req.Addr, ""); err != nil {
		return nil, err
	}
	if err := checkTraffic("heartbeat", req.Id, req.BytesRead, req.BytesWritten); err != nil {
		return nil, err
	}
	if len(req.Sample) > maxListInBeat || len(req.ExtendLeases) > maxListInBeat || len(req.Corrupt) > maxListInBeat || len(req.Leases) > maxListInBeat || len(req.Deleted) > maxListInBeat {
		return nil, chunkfs.E("heartbeat", req.Id, chunkfs.KindTooLarge, "heartbeat lists too long")
	}
	if _, err := m.sameCluster("heartbeat", req.Id, req.ClusterId); err != nil {
		return nil, err
	}
	now := m.cfg.Clock.Now()
	leads := m.leads()
	if len(req.ExtendLeases) > 0 && leads {
		if err := m.ensureHorizon(ctx, now.Add(m.cfg.LeaseDuration+m.leaseSlack())); err != nil {
			return nil, err
		}
	}
	resp := &pb.HeartbeatResponse{LeaseMs: m.cfg.LeaseDuration.Milliseconds(), TokenKeys: keysTo(m.keysFor())}
	var d beaten
	d, resp.StateId = m.heartbeat(beatFrom(req), now, leads)
	m.traffic.note(req.Id, req.BytesRead, req.BytesWritten)
	resp.Reregister = d.reregister
	if !leads {
		return resp, nil // figures and locations only: no deletions, no leases
	}
	resp.Garbage, resp.Extended = handlesTo(d.garbage), handlesTo(d.extended)
	if len(d.adopted) > 0 {
		m.cfg.Logger.Info("adopted leases the previous leader granted", "primary", req.Addr, "chunks", len(d.adopted))
	}
	if len(d.verify) > 0 {
		resp.Garbage = append(resp.Garbage, m.verifyDoubts(ctx, req.Id, req.Addr, d.verify)...)
	}
	return resp, nil
}

// heartbeat has the registry take b. It reads the versions of the chunks
// b names under the state lock, then takes the registry lock alone and
// uses them if no chunk command was applied meanwhile (state.versionsFor);
// only then does it hold both locks, as other handlers do. A heartbeat
// waiting for the registry lock so holds no read lock, which would keep
// an apply, and every read behind it, waiting too. Heartbeats go in one
// at a time (beatMu): a metadata call waiting for the registry lock waits
// behind one heartbeat at most, not behind a queue of them, and the
// versions read are seldom stale by the time the registry lock is taken.
//
// Under overload — maxBeatsWaiting heartbeats waiting already — a
// heartbeat skips its sample: it records the server's figures and leases,
// extends leases and takes its garbage, which is quick, and the replicas
// it sampled are checked at a later one. The master so keeps every server
// alive and every lease extended when it cannot check 10,000 samples
// every 3 s, instead of a queue of slow heartbeats growing until their
// calls time out and the servers are declared dead. It still waits its
// turn: heartbeats crowding the registry lock would hold up every call
// that waits for it with the state lock held.
func (m *Master) heartbeat(b beat, now time.Time, leads bool) (beaten, uint64) {
	leaseFor := m.cfg.LeaseDuration + m.leaseSlack()
	if m.beatsWaiting.Add(1) > maxBeatsWaiting {
		b.sample = nil
	}
	m.beatMu.Lock()
	defer m.beatMu.Unlock()
	m.beatsWaiting.Add(-1)
	leased := make([]chunkfs.Handle, len(b.leases))
	for i, l := range b.leases {
		leased[i] = l.handle
	}
	sampled := make([]chunkfs.Handle, len(b.sample))
	for i, c := range b.sample {
		sampled[i] = c.handle
	}
	vs, id := m.state.versionsFor(sampled, b.corrupt, leased)
	m.regMu.Lock()
	if m.state.current(vs) {
		d := m.reg.heartbeat(b, m.reg.withCopies(vs.version), now, leaseFor, leads)
		m.regMu.Unlock()
		return d, id
	}
	m.regMu.Unlock()
	var d beaten
	id = m.state.read(func(ns *namespace.Namespace) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		d = m.reg.heartbeat(b, m.reg.withCopies(ns.ChunkVersion), now, leaseFor, leads)
	})
	return d, id
}

// maxBeatsWaiting is how many heartbeats may wait to be let into the
// registry before the next skips its sample (heartbeat).
const maxBeatsWaiting = 32

// verifyDoubts asks the server (id at addr) for the version of each of its
// replicas in doubt in handles and settles them: one at the logged version
// is counted again, one behind it (or of a deleted chunk) is garbage and
// returned, one ahead of the log is left to a registration to adopt. A
// replica the server cannot describe, or that a later call put in doubt
// again, stays in doubt.
func (m *Master) verifyDoubts(ctx context.Context, id, addr string, handles []chunkfs.Handle) []uint64 {
	m.regMu.Lock()
	gens := m.reg.doubtGens(id, handles)
	m.regMu.Unlock()
	if gens == nil {
		return nil
	}
	versions := make([]chunkfs.Version, len(handles))
	errs := make([]error, len(handles))
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RPCTimeout) // for all of them: the heartbeat waits
	defer cancel()
	for i, h := range handles {
		versions[i], _, errs[i] = m.replicaVersion(ctx, addr, h)
	}
	var garbage []uint64
	m.state.read(func(ns *namespace.Namespace) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		garbage = handlesTo(m.reg.settle(id, addr, handles, gens, versions, errs, m.reg.withCopies(ns.ChunkVersion), m.cfg.Clock.Now()))
	})
	return garbage
}

// replicaVersion asks the chunkserver at addr for its replica's version
// and whether the replica's last mutation failed for want of space.
func (m *Master) replicaVersion(ctx context.Context, addr string, h chunkfs.Handle) (v chunkfs.Version, noSpace bool, err error) {
	cs, err := m.pool.ChunkServer(addr)
	if err != nil {
		return 0, false, err
	}
	resp, err := cs.ChunkInfo(ctx, &pb.ChunkInfoRequest{Handle: uint64(h)})
	if err != nil {
		return 0, false, err
	}
	return chunkfs.Version(resp.Version), resp.NoSpace, nil
}

// ReportCorrupt forgets a replica that failed its checksum and tells its
// server to delete it.
func (m service) ReportCorrupt(ctx context.Context, req *pb.ReportCorruptRequest) (*pb.ReportCorruptResponse, error) {
	if len(req.Replica) > maxAddrLen || len(req.Reporter) > maxAddrLen {
		return nil, chunkfs.E("report corrupt", "", chunkfs.KindInvalid, "address too long")
	}
	m.regMu.Lock()
	found := m.reg.corruptAt(req.Replica, chunkfs.Handle(req.Handle), m.cfg.Clock.Now())
	m.regMu.Unlock()
	if found {
		m.cfg.Logger.Warn("corrupt replica reported", "handle", req.Handle, "replica", req.Replica, "reporter", req.Reporter)
	}
	return &pb.ReportCorruptResponse{StateId: m.state.stateID()}, nil
}

// ClusterReport answers the master's cluster report.
func (m service) ClusterReport(ctx context.Context, req *pb.ClusterReportRequest) (*pb.ClusterReportResponse, error) {
	return reportTo(m.clusterReport()), nil
}

// reportTo is a cluster report on the wire.
func reportTo(r clusterReport) *pb.ClusterReportResponse {
	resp := &pb.ClusterReportResponse{
		StateId: r.stateID, Files: r.live.Files, Directories: r.live.Dirs, Chunks: r.live.Chunks, Bytes: r.live.Bytes,
		DeadFiles: r.dead.Files, DeadDirectories: r.dead.Dirs, DeadChunks: r.dead.Chunks, DeadBytes: r.dead.Bytes,
		ChunkSize: r.chunkSize, UnderReplicated: r.underReplicated, Missing: r.missing, BeingCloned: r.beingCloned,
		Corrupt: r.corrupt, RepairRate: r.repairRate, Repaired: r.repaired, SafeMode: r.safeMode,
		SafeModeReason: r.safeModeReason, SafeModeHeld: r.safeModeHeld, Balance: balanceTo(r.balance),
		Servers: make([]*pb.ChunkServerStatus, len(r.servers)),
	}
	for i, s := range r.servers {
		resp.Servers[i] = &pb.ChunkServerStatus{
			Id: s.id, Addr: s.addr, Rack: s.rack, Capacity: s.capacity, Used: s.used, Free: s.free, Load: s.load,
			Chunks: s.chunks, Alive: s.alive, LastHeartbeatMs: s.sinceBeat.Milliseconds(), Disks: disksTo(s.disks),
			State: s.state, DrainRemaining: s.drainRemaining,
		}
	}
	return resp
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
	m.regMu.Lock()
	dead := m.reg.markDead(m.cfg.Clock.Now(), m.cfg.DeadAfter)
	names := make([][2]string, len(dead)) // read under the lock: a server registering again rewrites them
	for i, s := range dead {
		names[i] = [2]string{s.id, s.addr}
	}
	m.regMu.Unlock()
	for _, n := range names {
		m.cfg.Logger.Warn("chunkserver dead", "id", n[0], "addr", n[1])
	}
}

// collect forgets chunks that became garbage; their servers are told to
// delete them at their next heartbeat.
func (m *Master) collect(handles []chunkfs.Handle) {
	if len(handles) > 0 {
		m.regMu.Lock()
		m.reg.forget(handles, m.cfg.Clock.Now())
		m.regMu.Unlock()
	}
}

// sameCluster returns this master's cluster ID, refusing a chunkserver
// that joined another cluster (its ID in its data directory differs): a
// chunkserver pointed at another cluster's master, or at a master whose
// directory was wiped, must be told nothing, above all not to delete its
// chunks. A server that joined no cluster yet, or a master whose
// namespace has no ID yet, passes.
func (m *Master) sameCluster(op, id, theirs string) (string, error) {
	var mine string
	m.state.read(func(ns *namespace.Namespace) { mine = ns.ClusterID() })
	if theirs != "" && mine != "" && theirs != mine {
		return "", chunkfs.E(op, id, chunkfs.KindPermission,
			fmt.Sprintf("chunkserver belongs to cluster %s; this master serves cluster %s", theirs, mine))
	}
	return mine, nil
}
