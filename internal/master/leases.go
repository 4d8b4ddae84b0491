package master

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// leaseSlack is added to the master's record of every lease: a chunkserver
// starts (or extends) its lease when our call reaches it, a little after we
// decided, so the master waits that much longer before it could grant the
// chunk to anyone else.
func (m *Master) leaseSlack() time.Duration { return min(m.cfg.LeaseDuration/10, time.Second) }

// ensureHorizon makes sure the logged lease horizon is at least t, so that
// a master restarting later waits out every lease given now. It logs a
// horizon half a lease beyond t, so that busy periods log it rarely.
func (m *Master) ensureHorizon(ctx context.Context, t time.Time) error {
	var cur int64
	m.state.read(func(ns *namespace.Namespace) { cur = ns.LeaseHorizon() })
	if cur >= t.UnixNano() {
		return nil
	}
	m.horizonMu.Lock()
	defer m.horizonMu.Unlock()
	m.state.read(func(ns *namespace.Namespace) { cur = ns.LeaseHorizon() })
	if cur >= t.UnixNano() {
		return nil
	}
	_, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpLeaseHorizon, Length: t.Add(m.cfg.LeaseDuration / 2).UnixNano()})
	return err
}

// placeChunk creates the replicas of a chunk that has none on servers
// chosen by the placement policy, granting the least loaded the lease. A
// chunk made before (rebump) gets a new version first, so that replicas of
// an earlier attempt are stale.
func (m *Master) placeChunk(ctx context.Context, p string, ch namespace.Chunk, repl int, rebump bool) error {
	mu := &m.leaseMu[handleStripe(ch.Handle)]
	mu.Lock()
	defer mu.Unlock()
	now := m.cfg.Clock.Now()
	if err := m.ensureHorizon(ctx, now.Add(m.cfg.LeaseDuration+m.leaseSlack())); err != nil {
		return err
	}
	if rebump {
		r, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpBumpVersion, Handle: ch.Handle})
		if err != nil {
			return err
		}
		ch.Version = r.Chunk.Version
	}
	m.reg.mu.Lock()
	chosen, err := m.reg.chooseLocked(m.cfg.Placement, max(repl, 1), now, nil)
	m.reg.mu.Unlock()
	if err != nil {
		return chunkfs.E("prepare write", p, chunkfs.KindNoSpace, "no live chunkserver can take a new chunk")
	}
	return m.grant(ctx, p, ch, chosen, true)
}

// ensureLease makes sure chunk ch (already placed) has a primary with a
// valid lease: if it has none, it bumps the version through the log and
// tells every live replica of the current version, naming one of them
// primary.
func (m *Master) ensureLease(ctx context.Context, p string, ch namespace.Chunk) error {
	mu := &m.leaseMu[handleStripe(ch.Handle)]
	mu.Lock()
	defer mu.Unlock()
	now := m.cfg.Clock.Now()
	var cur chunkfs.Version
	m.state.read(func(ns *namespace.Namespace) { cur, _ = ns.ChunkVersion(ch.Handle) })
	if cur == 0 {
		return chunkfs.E("prepare write", p, chunkfs.KindNotExist, "chunk was deleted")
	}
	m.reg.mu.Lock()
	primary, _ := m.reg.leaseLocked(ch.Handle, now)
	valid := primary != nil && primary.chunks[ch.Handle] == cur
	outstanding := m.reg.leaseOutstandingLocked(ch.Handle, now)
	replicas := m.reg.replicasLocked(ch.Handle, cur)
	m.reg.mu.Unlock()
	if valid {
		return nil
	}
	if outstanding {
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "a lease given to an unreachable or stale primary has not ended; retry")
	}
	if ch.Handle < m.handleFloor && now.Before(m.leasePause) {
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable,
			"master restarted; leases on existing chunks resume in "+m.leasePause.Sub(now).Round(time.Second).String())
	}
	if err := m.ensureHorizon(ctx, now.Add(m.cfg.LeaseDuration+m.leaseSlack())); err != nil {
		return err
	}
	if len(replicas) == 0 {
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "no live replica of the chunk")
	}
	r, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpBumpVersion, Handle: ch.Handle})
	if err != nil {
		return err
	}
	ch.Version = r.Chunk.Version
	return m.grant(ctx, p, ch, replicas, false)
}

// grant tells replicas that ch has version ch.Version (creating it when
// create is set) and grants the lease to the least loaded one. Replicas
// that fail are forgotten: they are stale now.
func (m *Master) grant(ctx context.Context, p string, ch namespace.Chunk, replicas []*server, create bool) error {
	m.reg.mu.Lock()
	order := slices.Clone(replicas)
	slices.SortStableFunc(order, func(a, b *server) int { return int(a.load) - int(b.load) })
	m.reg.mu.Unlock()
	leaseMs := m.cfg.LeaseDuration.Milliseconds()
	errs := m.callLease(ctx, ch, order, create, leaseMs)
	var primary *server
	m.reg.mu.Lock()
	for i, s := range order {
		if errs[i] != nil {
			m.reg.dropReplicaLocked(s, ch.Handle)
			continue
		}
		m.reg.addReplicaLocked(s, ch.Handle, ch.Version)
		if i == 0 {
			primary = s
		}
	}
	m.reg.mu.Unlock()
	if primary == nil {
		primary = m.promote(ctx, ch, order, errs, leaseMs)
	}
	if primary == nil {
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "no replica accepted the lease: "+firstErr(errs).Error())
	}
	m.reg.mu.Lock()
	if ci := m.reg.chunks[ch.Handle]; ci != nil {
		ci.primary, ci.expiry = primary, m.cfg.Clock.Now().Add(m.cfg.LeaseDuration+m.leaseSlack())
	}
	m.reg.mu.Unlock()
	return nil
}

// promote grants the lease to the first secondary that took the version,
// when the chosen primary failed.
func (m *Master) promote(ctx context.Context, ch namespace.Chunk, order []*server, errs []error, leaseMs int64) *server {
	for i, s := range order {
		if i == 0 || errs[i] != nil {
			continue
		}
		if m.leaseCall(ctx, s.addr, &pb.LeaseRequest{Handle: uint64(ch.Handle), Version: uint64(ch.Version), LeaseMs: leaseMs}) == nil {
			return s
		}
	}
	return nil
}

// callLease sends Lease to every replica at once; the first gets leaseMs.
func (m *Master) callLease(ctx context.Context, ch namespace.Chunk, order []*server, create bool, leaseMs int64) []error {
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, s := range order {
		req := &pb.LeaseRequest{Handle: uint64(ch.Handle), Version: uint64(ch.Version), Create: create}
		if i == 0 {
			req.LeaseMs = leaseMs
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.leaseCall(ctx, s.addr, req)
		}()
	}
	wg.Wait()
	return errs
}

func (m *Master) leaseCall(ctx context.Context, addr string, req *pb.LeaseRequest) error {
	cs, err := m.pool.ChunkServer(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RPCTimeout)
	defer cancel()
	_, err = cs.Lease(ctx, req)
	if err != nil {
		m.cfg.Logger.Warn("lease call failed", "addr", addr, "handle", req.Handle, "version", req.Version, "err", err)
	}
	return err
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return chunkfs.E("", "", chunkfs.KindUnavailable, "no replicas")
}

// cutChunk has the replicas of a chunk that a truncation cut in its middle
// shorten it, at the version the truncation gave it. Its lease is revoked;
// replicas that fail are forgotten, being stale now.
func (m *Master) cutChunk(ctx context.Context, cut namespace.Cut) {
	m.reg.mu.Lock()
	replicas := m.reg.replicasLocked(cut.Handle, cut.Version-1)
	if ci := m.reg.chunks[cut.Handle]; ci != nil {
		ci.primary = nil
	}
	m.reg.mu.Unlock()
	var wg sync.WaitGroup
	ok := make([]bool, len(replicas))
	for i, s := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = m.truncateCall(ctx, s.addr, cut) == nil
		}()
	}
	wg.Wait()
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	for i, s := range replicas {
		if ok[i] {
			m.reg.addReplicaLocked(s, cut.Handle, cut.Version)
		} else {
			m.reg.dropReplicaLocked(s, cut.Handle)
		}
	}
}

func (m *Master) truncateCall(ctx context.Context, addr string, cut namespace.Cut) error {
	cs, err := m.pool.ChunkServer(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RPCTimeout)
	defer cancel()
	_, err = cs.Truncate(ctx, &pb.TruncateRequest{Handle: uint64(cut.Handle), Version: uint64(cut.Version), Length: cut.Length})
	if err != nil {
		m.cfg.Logger.Warn("truncate call failed", "addr", addr, "handle", cut.Handle, "err", err)
	}
	return err
}
