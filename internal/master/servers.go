package master

// The master's side of the chunkservers' calls: registrations, heartbeats,
// corruption reports, and the liveness check that declares a silent
// server dead. servers_rpc.go converts the calls.

import (
	"context"
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// Bounds on chunkserver input.
const (
	maxIDLen       = 256
	maxAddrLen     = 512
	maxListInBeat  = 100000 // sample, extend_leases, corrupt, leases and deleted entries per heartbeat
	maxReportLen   = 1 << 22
	maxServerCount = 10000
)

// A sender is what a chunkserver's registration and heartbeat carry
// beside its report: the cluster it joined (empty while it joined none)
// and its traffic totals.
type sender struct {
	cluster       string
	read, written int64
}

// registerAnswer is the master's answer to a registration.
type registerAnswer struct {
	stateID        uint64
	cluster        string // this master's cluster ID, for a server that joined none
	beatEvery      time.Duration
	keys           []heldKey
	garbage, stale []chunkfs.Handle // replicas to delete (the leader's answer only)
}

// checkServer bounds what a server says of itself.
func checkServer(op string, f figures, from sender) error {
	switch {
	case f.id == "" || len(f.id) > maxIDLen:
		return chunkfs.E(op, "", chunkfs.KindInvalid, "chunkserver ID empty or too long")
	case f.addr == "" || len(f.addr) > maxAddrLen:
		return chunkfs.E(op, f.id, chunkfs.KindInvalid, "chunkserver address empty or too long")
	case len(f.rack) > maxIDLen:
		return chunkfs.E(op, f.id, chunkfs.KindInvalid, "rack name too long")
	}
	return checkTraffic(op, f.id, from.read, from.written)
}

// registerServer takes a chunkserver's full report (registry.register says
// which replicas count, which are garbage or stale, and which are ahead of
// the log), logs the versions of those ahead, and drops the master's
// connection to a server that registers again, so that calls to it are
// redialled at once.
func (m *Master) registerServer(ctx context.Context, from sender, rep fullReport) (registerAnswer, error) {
	if err := checkServer("register", rep.figures, from); err != nil {
		return registerAnswer{}, err
	}
	if len(rep.chunks) > maxReportLen || len(rep.leases) > maxReportLen {
		return registerAnswer{}, chunkfs.E("register", rep.id, chunkfs.KindTooLarge, "chunk report too long")
	}
	cluster, err := m.sameCluster("register", rep.id, from.cluster)
	if err != nil {
		return registerAnswer{}, err
	}
	a := registerAnswer{cluster: cluster, beatEvery: m.cfg.HeartbeatInterval, keys: m.keysFor()}
	d, id, err := m.register(rep, cluster)
	if err != nil {
		return registerAnswer{}, err
	}
	a.stateID = id
	m.traffic.note(rep.id, from.read, from.written)
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
			m.reg.askAgain(rep.id)
			m.regMu.Unlock()
		}
		return a, nil
	}
	a.garbage, a.stale = d.garbage, d.stale
	if id, err := m.adopt(context.WithoutCancel(ctx), d.ahead); err != nil {
		return registerAnswer{}, err
	} else if id > 0 {
		a.stateID = id
	}
	m.cfg.Logger.Info("chunkserver registered", "id", rep.id, "addr", rep.addr, "chunks", len(rep.chunks), "garbage", len(a.garbage), "stale", len(a.stale))
	return a, nil
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
	vs, id := m.state.versionsFor(replicaHandles(rep.chunks), leaseHandles(rep.leases))
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

// replicaHandles is the chunks of rs.
func replicaHandles(rs []replica) []chunkfs.Handle {
	out := make([]chunkfs.Handle, len(rs))
	for i, r := range rs {
		out[i] = r.handle
	}
	return out
}

// leaseHandles is the chunks of ls.
func leaseHandles(ls []heldReport) []chunkfs.Handle {
	out := make([]chunkfs.Handle, len(ls))
	for i, l := range ls {
		out[i] = l.handle
	}
	return out
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

// beatAnswer is the master's answer to a heartbeat.
type beatAnswer struct {
	stateID           uint64
	leaseFor          time.Duration
	keys              []heldKey
	reregister        bool
	garbage, extended []chunkfs.Handle // replicas to delete, leases extended (the leader's answer only)
}

// beatServer records a chunkserver's figures, answers its sample with the
// replicas it should delete, and extends the leases it asks for.
func (m *Master) beatServer(ctx context.Context, from sender, b beat) (beatAnswer, error) {
	if err := checkServer("heartbeat", b.figures, from); err != nil {
		return beatAnswer{}, err
	}
	if len(b.sample) > maxListInBeat || len(b.extend) > maxListInBeat || len(b.corrupt) > maxListInBeat || len(b.leases) > maxListInBeat || len(b.deleted) > maxListInBeat {
		return beatAnswer{}, chunkfs.E("heartbeat", b.id, chunkfs.KindTooLarge, "heartbeat lists too long")
	}
	if _, err := m.sameCluster("heartbeat", b.id, from.cluster); err != nil {
		return beatAnswer{}, err
	}
	now := m.cfg.Clock.Now()
	leads := m.leads()
	if len(b.extend) > 0 && leads {
		if err := m.ensureHorizon(ctx, now.Add(m.cfg.LeaseDuration+m.leaseSlack())); err != nil {
			return beatAnswer{}, err
		}
	}
	a := beatAnswer{leaseFor: m.cfg.LeaseDuration, keys: m.keysFor()}
	d, id := m.heartbeat(b, now, leads)
	m.traffic.note(b.id, from.read, from.written)
	a.stateID, a.reregister = id, d.reregister
	if !leads {
		return a, nil // figures and locations only: no deletions, no leases
	}
	a.garbage, a.extended = d.garbage, d.extended
	if len(d.adopted) > 0 {
		m.cfg.Logger.Info("adopted leases the previous leader granted", "primary", b.addr, "chunks", len(d.adopted))
	}
	if len(d.verify) > 0 {
		a.garbage = append(a.garbage, m.verifyDoubts(ctx, b.id, b.addr, d.verify)...)
	}
	return a, nil
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
	vs, id := m.state.versionsFor(replicaHandles(b.sample), b.corrupt, leaseHandles(b.leases))
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
func (m *Master) verifyDoubts(ctx context.Context, id, addr string, handles []chunkfs.Handle) []chunkfs.Handle {
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
	var garbage []chunkfs.Handle
	m.state.read(func(ns *namespace.Namespace) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		garbage = m.reg.settle(id, addr, handles, gens, versions, errs, m.reg.withCopies(ns.ChunkVersion), m.cfg.Clock.Now())
	})
	return garbage
}

// reportCorrupt forgets the replica at addr of chunk h, which failed its
// checksum at reporter, and has its server told to delete it.
func (m *Master) reportCorrupt(addr, reporter string, h chunkfs.Handle) (uint64, error) {
	if len(addr) > maxAddrLen || len(reporter) > maxAddrLen {
		return 0, chunkfs.E("report corrupt", "", chunkfs.KindInvalid, "address too long")
	}
	m.regMu.Lock()
	found := m.reg.corruptAt(addr, h, m.cfg.Clock.Now())
	m.regMu.Unlock()
	if found {
		m.cfg.Logger.Warn("corrupt replica reported", "handle", h, "replica", addr, "reporter", reporter)
	}
	return m.state.stateID(), nil
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
