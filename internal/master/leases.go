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
		ch.Version = m.nextVersion(ch.Handle, m.currentVersion(ch.Handle))
	}
	m.reg.mu.Lock()
	chosen, err := m.reg.chooseLocked(m.cfg.Placement, max(repl, 1), now, nil)
	m.reg.mu.Unlock()
	if err != nil {
		return chunkfs.E("prepare write", p, chunkfs.KindNoSpace, "no live chunkserver can take a new chunk")
	}
	return m.grant(ctx, p, ch, chosen, true, !rebump)
}

// ensureLease makes sure chunk ch (already placed) has a primary with a
// valid lease: if it has none, it tells every live replica of the current
// version the next version, naming one of them primary, and logs it.
func (m *Master) ensureLease(ctx context.Context, p string, ch namespace.Chunk) error {
	mu := &m.leaseMu[handleStripe(ch.Handle)]
	mu.Lock()
	defer mu.Unlock()
	now := m.cfg.Clock.Now()
	cur := m.currentVersion(ch.Handle)
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
	ch.Version = m.nextVersion(ch.Handle, cur)
	return m.grant(ctx, p, ch, replicas, false, false)
}

// grant tells replicas that ch has version ch.Version (creating it when
// create is set), granting the lease to the least loaded; then, unless the
// version is already logged, it logs the version (OpSetVersion). Versions
// told are never told again for another lease, so a primary that may hold
// a lease from a failed grant is fenced off by the next one's version. Telling
// before logging means a crash in between leaves replicas ahead of the log,
// which Register adopts; the reverse would leave every replica stale.
// Replicas that fail are forgotten: they are stale now.
func (m *Master) grant(ctx context.Context, p string, ch namespace.Chunk, replicas []*server, create, logged bool) error {
	m.reg.mu.Lock()
	order := slices.Clone(replicas)
	slices.SortStableFunc(order, func(a, b *server) int { return int(a.load) - int(b.load) })
	m.reg.mu.Unlock()
	if len(order) == 0 {
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "no replica to grant the lease to")
	}
	m.noteTold(ch.Handle, ch.Version)
	leaseMs := m.cfg.LeaseDuration.Milliseconds()
	errs := m.callLease(ctx, ch, order, create, leaseMs)
	primary := order[0]
	if errs[0] != nil {
		// The primary may or may not hold the lease now. Nothing is
		// logged; the next grant uses a version above every one told
		// (fencing it off) and, with it forgotten, another primary.
		m.forgetFailed(ch.Handle, order[:1], errs[:1])
		if create {
			m.forgetFailed(ch.Handle, order, errs)
		}
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "the chosen primary did not take the lease: "+errs[0].Error())
	}
	expiry := m.cfg.Clock.Now().Add(m.cfg.LeaseDuration + m.leaseSlack())
	// The replicas that took the version are recorded at it before it is
	// logged, so that no moment exists where the log is ahead of the
	// record: a full report they built before the call may be handled at
	// any time, and Register trusts the record over such a report.
	m.recordTaken(ch.Handle, ch.Version, order, errs)
	var err error
	if !logged {
		_, _, err = m.apply(ctx, &namespace.Command{Op: namespace.OpSetVersion, Handle: ch.Handle, Length: int64(ch.Version)})
	}
	if err == nil {
		m.forgetFailed(ch.Handle, order, errs)
	}
	// Even when logging failed, the primary holds the lease: no other
	// may be named until it ends (its version, ahead of the log, does not
	// count as current meanwhile).
	m.recordLease(ch.Handle, primary, expiry)
	return err
}

// recordTaken records the replicas whose calls succeeded at version v.
func (m *Master) recordTaken(h chunkfs.Handle, v chunkfs.Version, order []*server, errs []error) {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	for i, s := range order {
		if errs[i] == nil {
			m.reg.addReplicaLocked(s, h, v)
			m.reg.clearDoubtLocked(s, h)
		}
	}
}

// forgetFailed drops the replicas whose calls failed, in doubt: the call
// may have reached them after all (see doubtLocked).
func (m *Master) forgetFailed(h chunkfs.Handle, order []*server, errs []error) {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	for i, s := range order {
		if errs[i] != nil {
			m.reg.doubtLocked(s, h)
		}
	}
}

// recordLease notes that primary holds h's lease until expiry.
func (m *Master) recordLease(h chunkfs.Handle, primary *server, expiry time.Time) {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	ci := m.reg.chunks[h]
	if ci == nil {
		ci = &chunkInfo{}
		m.reg.chunks[h] = ci
	}
	ci.primary, ci.expiry = primary, expiry
}

// nextVersion returns a version above cur and above every version ever
// told for h, so that no two grants share one.
func (m *Master) nextVersion(h chunkfs.Handle, cur chunkfs.Version) chunkfs.Version {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	if ci := m.reg.chunks[h]; ci != nil {
		cur = max(cur, ci.told)
	}
	return cur + 1
}

// noteTold records that version v of h has been sent to chunkservers.
func (m *Master) noteTold(h chunkfs.Handle, v chunkfs.Version) {
	m.reg.mu.Lock()
	defer m.reg.mu.Unlock()
	ci := m.reg.chunks[h]
	if ci == nil {
		ci = &chunkInfo{}
		m.reg.chunks[h] = ci
	}
	ci.told = max(ci.told, v)
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

// cutChunk has the replicas of a chunk that a truncation of file p cut in
// its middle shorten it at the next version, then logs that version. Its
// lease is revoked (the new version makes the old primary's mutations
// fail). The replicas that took the cut are recorded at the new version
// before it is logged; those that failed are forgotten, in doubt, once it
// is logged.
//
// The new version is logged only when at least one replica took the cut:
// logging it otherwise would make every replica stale and lose the chunk.
// Then nothing is logged or forgotten and the caller gets KindUnavailable;
// the chunk keeps its bytes past the new end until a truncation to the same
// length (which cuts again) succeeds.
//
// The cut applies to the version the truncation saw. If a lease was granted
// on the chunk since (its version moved), writes after the truncation may
// be in the chunk, and cutting now could destroy them: the cut is skipped.
func (m *Master) cutChunk(ctx context.Context, p string, cut namespace.Cut) error {
	mu := &m.leaseMu[handleStripe(cut.Handle)]
	mu.Lock()
	defer mu.Unlock()
	cur := m.currentVersion(cut.Handle)
	switch {
	case cur == 0:
		return nil // deleted meanwhile
	case cur != cut.Version-1:
		m.cfg.Logger.Warn("truncated chunk was leased again before it was cut; not cut", "handle", cut.Handle, "version", cur, "truncated_at", cut.Version-1)
		return nil
	}
	cut.Version = m.nextVersion(cut.Handle, cur)
	m.noteTold(cut.Handle, cut.Version)
	m.reg.mu.Lock()
	replicas := m.reg.replicasLocked(cut.Handle, cur)
	if ci := m.reg.chunks[cut.Handle]; ci != nil {
		ci.primary = nil
	}
	m.reg.mu.Unlock()
	errs := m.callTruncate(ctx, cut, replicas)
	if !slices.Contains(errs, nil) {
		return chunkfs.E("truncate", p, chunkfs.KindUnavailable, "no live replica of the chunk holding the new end could be cut; retry the truncation")
	}
	m.recordTaken(cut.Handle, cut.Version, replicas, errs)
	if _, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpSetVersion, Handle: cut.Handle, Length: int64(cut.Version)}); err != nil {
		// The replicas that took the cut are ahead of the log; a
		// registration adopts their version.
		m.cfg.Logger.Warn("logging a truncated chunk's version failed", "handle", cut.Handle, "err", err)
		return err
	}
	m.forgetFailed(cut.Handle, replicas, errs)
	return nil
}

// callTruncate sends Truncate to every replica at once.
func (m *Master) callTruncate(ctx context.Context, cut namespace.Cut, replicas []*server) []error {
	var wg sync.WaitGroup
	errs := make([]error, len(replicas))
	for i, s := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.truncateCall(ctx, s.addr, cut)
		}()
	}
	wg.Wait()
	return errs
}

// currentVersion returns chunk h's logged version, 0 if it does not exist.
func (m *Master) currentVersion(h chunkfs.Handle) chunkfs.Version {
	var v chunkfs.Version
	m.state.read(func(ns *namespace.Namespace) { v, _ = ns.ChunkVersion(h) })
	return v
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
