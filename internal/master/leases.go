package master

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
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
	_, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpLeaseHorizon, Horizon: t.Add(m.cfg.LeaseDuration / 2).UnixNano()})
	return err
}

// placeChunk creates the replicas of a chunk that has none on servers
// chosen by the placement policy, granting the least loaded the lease. A
// chunk made before (rebump) gets a new version first, so that replicas of
// an earlier attempt are stale. It refuses while the master is in safe mode
// (KindUnavailable), when fewer than the minimum replicas' servers are
// alive (KindUnavailable), and when fewer than that have room (KindNoSpace).
func (m *Master) placeChunk(ctx context.Context, p string, ch namespace.Chunk, repl int, rebump bool) error {
	mu := &m.leaseMu[handleStripe(ch.Handle)]
	mu.Lock()
	defer mu.Unlock()
	if err := m.checkSafeMode("prepare write", p); err != nil {
		return err
	}
	now := m.cfg.Clock.Now()
	if err := m.ensureHorizon(ctx, now.Add(m.cfg.LeaseDuration+m.leaseSlack())); err != nil {
		return err
	}
	if rebump {
		m.regMu.Lock()
		ch.Version = m.reg.nextVersion(ch.Handle, m.currentVersion(ch.Handle))
		m.regMu.Unlock()
	}
	m.regMu.Lock()
	chosen, err := m.reg.choose(m.cfg.Placement, max(repl, 1), now, nil)
	live := len(m.reg.live())
	m.regMu.Unlock()
	need := m.cfg.minReplicas(repl)
	if live < need {
		// Too few servers, not too little room: they may be
		// re-registering after a restart, or dead; the writer waits.
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable,
			fmt.Sprintf("%d live chunkservers, a new chunk needs at least %d", live, need))
	}
	if err != nil || len(chosen) < need {
		return chunkfs.E("prepare write", p, chunkfs.KindNoSpace,
			fmt.Sprintf("%d live chunkservers with free space, a new chunk needs at least %d", len(chosen), need))
	}
	return m.grant(ctx, p, ch, chosen, true, !rebump, need)
}

// ensureLease makes sure chunk ch (already placed) has a primary with a
// valid lease at a version every counted replica holds: the registry
// decides (grantable) whether the lease in place serves, must be waited
// out, or a new one is granted at the next version (after the replica set
// shrank, that fences the lost replicas). A chunk with fewer live replicas
// than the minimum takes no write until it is healed; it goes first in the
// repair queue.
//
// A writer that names the primary it failed with (suspect) has the master
// probe it: a primary that does not answer within probeTimeout loses the
// lease at once (registry.dropPrimary), so the writer waits seconds, not
// a lease.
func (m *Master) ensureLease(ctx context.Context, p string, ch namespace.Chunk, repl int, suspect string) error {
	mu := &m.leaseMu[handleStripe(ch.Handle)]
	mu.Lock()
	defer mu.Unlock()
	now := m.cfg.Clock.Now()
	cur := m.currentVersion(ch.Handle)
	if cur == 0 {
		return chunkfs.E("prepare write", p, chunkfs.KindNotExist, "chunk was deleted")
	}
	if m.shared(ch.Handle) {
		return errShared // a snapshot took it since it was copied or looked at
	}
	if suspect != "" {
		m.probeSuspect(ctx, ch.Handle, cur, suspect, m.cfg.minReplicas(repl))
		now = m.cfg.Clock.Now()
	}
	pause, floor := m.lead.leaseHold()
	m.regMu.Lock()
	if ch.Handle < floor && now.Before(pause) {
		m.reg.adopt(ch.Handle, cur, now) // a lease the previous leader granted, reported by its primary
	}
	d := m.reg.grantable(ch.Handle, cur, now)
	need := m.cfg.minReplicas(repl)
	if d.verdict == leaseGrant && len(d.replicas) < need {
		m.reg.block(ch.Handle, now)
	}
	m.regMu.Unlock()
	switch {
	case d.verdict == leaseValid:
		return nil
	case d.verdict == leaseWait:
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "a lease given to an unreachable or stale primary has not ended; retry")
	case ch.Handle < floor && now.Before(pause) && !d.fenced:
		// A fenced grant moves a lease this master holds on record (an
		// adopted one) to a new version: no other lease on the chunk
		// can be out at its version. Any other waits for the hold.
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable,
			"master restarted or took over; leases on existing chunks resume in "+pause.Sub(now).Round(time.Second).String())
	case d.verdict == leaseNone:
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "no live replica of the chunk")
	case len(d.replicas) < need:
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable,
			fmt.Sprintf("the chunk has %d live replicas, below the minimum of %d; it is being re-replicated", len(d.replicas), need))
	}
	if err := m.ensureHorizon(ctx, now.Add(m.cfg.LeaseDuration+m.leaseSlack())); err != nil {
		return err
	}
	m.regMu.Lock()
	ch.Version = m.reg.nextVersion(ch.Handle, cur)
	m.regMu.Unlock()
	if d.fenced {
		m.cfg.Logger.InfoContext(ctx, "replica set shrank under a lease; moving the survivors to a new version", "handle", ch.Handle, "version", ch.Version, "replicas", len(d.replicas))
	}
	return m.grant(ctx, p, ch, d.replicas, false, false, need)
}

// probeTimeout bounds the master's check of a primary a writer reports.
func (m *Master) probeTimeout() time.Duration { return min(m.cfg.RPCTimeout, 2*time.Second) }

// probeSuspect checks the replicas of chunk h (at logged version cur)
// after a writer's attempt failed and named addr, the primary it used.
// The failure may have been any replica's (a push goes along all of
// them), so every live replica is asked, at once, whether it answers
// for the chunk at that version. The primary must, or its lease is
// dropped. A secondary that does not leaves the lease's replica set
// (fencing it: the writer's grant goes to the others at a new version)
// when at least need others remain. So a writer waits seconds, not until
// the server is declared dead. (A replica whose disk failed the write
// has reported its copy corrupt already.)
//
// A replica whose last mutation failed for want of space answers, but
// fails the check the same: every further write that grows the chunk
// would fail there too. Its server is full to the registry from then on
// (registry.full), until a heartbeat reports room: no new replica and no
// clone goes there. The chunk is healed on a server with room.
func (m *Master) probeSuspect(ctx context.Context, h chunkfs.Handle, cur chunkfs.Version, addr string, need int) {
	now := m.cfg.Clock.Now()
	m.regMu.Lock()
	primary := m.reg.primaryAt(h, addr, now)
	replicas := m.reg.replicas(h, cur)
	to := addrs(replicas)
	m.regMu.Unlock()
	if primary == nil {
		return // not the primary (any more): the lease moved already
	}
	pctx, cancel := context.WithTimeout(ctx, m.probeTimeout())
	defer cancel()
	failed := make([]error, len(replicas))
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			v, noSpace, err := m.replicaVersion(pctx, to[i], h)
			switch {
			case err != nil:
			case v != cur:
				err = fmt.Errorf("replica at version %d", v)
			case noSpace:
				err = chunkfs.E("probe", to[i], chunkfs.KindNoSpace, "the replica's last mutation failed for want of space")
			}
			failed[i] = err
		})
	}
	wg.Wait()
	for i, s := range replicas {
		switch {
		case failed[i] == nil:
		case chunkfs.KindOf(failed[i]) == chunkfs.KindNoSpace:
			m.regMu.Lock()
			out := m.reg.dropFull(h, cur, s, need, m.cfg.Clock.Now())
			m.regMu.Unlock()
			if out {
				m.cfg.Logger.WarnContext(ctx, "a replica ran out of space under a write; moving the lease to the other replicas", "handle", h, "replica", to[i])
			}
		case s == primary:
			m.dropPrimary(ctx, h, primary, to[i], failed[i])
		default:
			m.regMu.Lock()
			out := m.reg.dropSecondary(h, cur, s, need, m.cfg.Clock.Now())
			m.regMu.Unlock()
			if out {
				m.pool.Forget(to[i])
				m.cfg.Logger.WarnContext(ctx, "a secondary did not answer after a write failed; moving the lease to the other replicas", "handle", h, "secondary", to[i], "err", failed[i])
			}
		}
	}
}

// dropPrimary drops h's lease held by primary, which did not answer for
// the chunk (err) at addr.
func (m *Master) dropPrimary(ctx context.Context, h chunkfs.Handle, primary *server, addr string, err error) {
	m.pool.Forget(addr)
	m.regMu.Lock()
	m.reg.dropPrimary(h, primary, m.cfg.Clock.Now())
	m.regMu.Unlock()
	m.cfg.Logger.WarnContext(ctx, "primary reported unreachable and did not answer; moving the lease", "handle", h, "primary", addr, "err", err)
}

// grant tells replicas (in order: the first is named primary) that ch has
// version ch.Version (creating it when create is set); then, unless the
// version is already logged, it logs the version (OpSetVersion). Versions
// told are never told again for another lease, so a primary that may hold
// a lease from a failed grant is fenced off by the next one's version. Telling
// before logging means a crash in between leaves replicas ahead of the log,
// which Register adopts; the reverse would leave every replica stale.
// Replicas that fail are forgotten: they are stale now. A grant that
// fewer than need replicas took fails, so no write is acknowledged on
// fewer than the minimum: a creation as a whole; any other with no lease
// recorded, the version the replicas took adopted (adoptTaken) and the
// chunk first in the repair queue, as a chunk below the minimum is.
func (m *Master) grant(ctx context.Context, p string, ch namespace.Chunk, order []*server, create, logged bool, need int) error {
	if len(order) == 0 {
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "no replica to grant the lease to")
	}
	m.regMu.Lock()
	m.reg.beginCalls(ch.Handle, ch.Version)
	to := addrs(order)
	m.regMu.Unlock()
	defer func() {
		m.regMu.Lock()
		m.reg.endCalls(ch.Handle)
		m.regMu.Unlock()
	}()
	leaseMs := m.cfg.LeaseDuration.Milliseconds()
	errs := m.callLease(ctx, ch, to, create, leaseMs)
	primary := order[0]
	took := 0
	for _, err := range errs {
		if err == nil {
			took++
		}
	}
	if errs[0] != nil || took < need {
		// The primary may or may not hold the lease now. Nothing is
		// logged; the next grant uses a version above every one told
		// (fencing it off) and, with it forgotten, another primary.
		now := m.cfg.Clock.Now()
		m.regMu.Lock()
		m.reg.forgetFailed(ch.Handle, order[:1], errs[:1], now)
		if create {
			m.reg.forgetFailed(ch.Handle, order, errs, now)
		} else if errs[0] == nil {
			m.reg.block(ch.Handle, now)
		}
		m.regMu.Unlock()
		if !create && took > 0 {
			m.adoptTaken(ctx, ch, order, errs)
		}
		switch {
		case errs[0] == nil && create:
			return chunkfs.E("prepare write", p, chunkfs.KindUnavailable, fmt.Sprintf("only %d of the chunk's new replicas were created, below the minimum of %d", took, need))
		case errs[0] == nil:
			return chunkfs.E("prepare write", p, chunkfs.KindUnavailable,
				fmt.Sprintf("only %d of the chunk's %d live replicas took the lease, below the minimum of %d; it is being re-replicated", took, len(order), need))
		}
		return chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "the chosen primary did not take the lease: "+errs[0].Error())
	}
	expiry := m.cfg.Clock.Now().Add(m.cfg.LeaseDuration + m.leaseSlack())
	// The replicas that took the version are recorded at it before it is
	// logged, so that no moment exists where the log is ahead of the
	// record: a full report they built before the call may be handled at
	// any time, and Register trusts the record over such a report.
	// The replicas that failed are held back at the version before it is
	// logged (missed): no chain at it is handed out until the log holds
	// them back too (registry.unlogged).
	m.regMu.Lock()
	m.reg.recordTaken(ch.Handle, ch.Version, order, errs)
	away := m.reg.missed(ch.Handle, ch.Version, order, errs)
	m.regMu.Unlock()
	var err, held error
	if !logged {
		_, _, err = m.apply(ctx, &namespace.Command{Op: namespace.OpSetVersion, Handle: ch.Handle, Version: ch.Version})
	}
	if err == nil {
		m.regMu.Lock()
		m.reg.forgetFailed(ch.Handle, order, errs, m.cfg.Clock.Now())
		m.regMu.Unlock()
		held = m.logHeldBack(ctx, p, ch, away)
	}
	m.regMu.Lock()
	defer m.regMu.Unlock()
	// Even when logging failed, the primary holds the lease: no other
	// may be named until it ends (its version, ahead of the log, does not
	// count as current meanwhile).
	m.reg.recordLease(ch.Handle, primary, expiry, m.cfg.Clock.Now())
	if held != nil {
		m.reg.fenceAway(ch.Handle)
	}
	return cmp.Or(err, held)
}

// logHeldBack logs that the replicas of ch on servers ids, whose Lease
// calls failed, are held back at ch.Version (registry.missed), before the
// grant's chain, which leaves them out, is handed out. A chunk deleted
// meanwhile needs none. When one cannot be logged the grant fails,
// retriably, and the chunk is fenced: the next writer gets a new version,
// which leaves the replicas stale.
func (m *Master) logHeldBack(ctx context.Context, p string, ch namespace.Chunk, ids []string) error {
	for _, id := range ids {
		_, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpHoldBack, Handle: ch.Handle, Version: ch.Version, Path: id})
		switch {
		case chunkfs.KindOf(err) == chunkfs.KindNotExist:
			return nil
		case err != nil:
			m.cfg.Logger.WarnContext(ctx, "could not log a replica held back; the chunk's next writer gets a new version", "handle", ch.Handle, "version", ch.Version, "server", id, "err", err)
			return chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "a replica that missed the lease could not be held back in the log; retry")
		}
		m.regMu.Lock()
		m.reg.loggedAway(id, ch.Handle, ch.Version)
		m.regMu.Unlock()
	}
	return nil
}

// adoptTaken settles a grant that failed (its primary did, or fewer than
// the minimum of replicas took it) after replicas took the new version:
// they are ahead of the log, and the clone of a replica at the logged
// version fails at them, so a chunk left with those replicas alone could
// never be re-replicated. As Register does for a
// replica ahead of the log (GFS §4.5: the higher version is the current
// one), the version is adopted: recorded, then logged. No lease is
// recorded: should the primary hold one, no client learnt of it (the
// grant answered with an error), so no mutation comes through it; the next
// grant fences it off with a higher version.
func (m *Master) adoptTaken(ctx context.Context, ch namespace.Chunk, order []*server, errs []error) {
	m.regMu.Lock()
	m.reg.recordTaken(ch.Handle, ch.Version, order, errs)
	m.regMu.Unlock()
	if _, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpSetVersion, Handle: ch.Handle, Version: ch.Version}); err != nil {
		m.cfg.Logger.WarnContext(ctx, "could not log the version replicas took from a failed grant", "handle", ch.Handle, "version", ch.Version, "err", err)
		return
	}
	m.cfg.Logger.InfoContext(ctx, "adopted the version replicas took from a failed grant", "handle", ch.Handle, "version", ch.Version)
}

// callLease sends Lease to every replica (at addresses to) at once; the
// first gets leaseMs.
func (m *Master) callLease(ctx context.Context, ch namespace.Chunk, to []string, create bool, leaseMs int64) []error {
	errs := make([]error, len(to))
	var wg sync.WaitGroup
	for i, addr := range to {
		ms := int64(0)
		if i == 0 {
			ms = leaseMs
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.leaseCall(ctx, addr, ch, create, ms)
		}()
	}
	wg.Wait()
	return errs
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
		m.cfg.Logger.WarnContext(ctx, "truncated chunk was leased again before it was cut; not cut", "handle", cut.Handle, "version", cur, "truncated_at", cut.Version-1)
		return nil
	}
	m.regMu.Lock()
	cut.Version = m.reg.nextVersion(cut.Handle, cur)
	m.reg.beginCalls(cut.Handle, cut.Version)
	replicas := m.reg.replicas(cut.Handle, cur)
	to := addrs(replicas)
	m.reg.revoke(cut.Handle)
	m.regMu.Unlock()
	defer func() {
		m.regMu.Lock()
		m.reg.endCalls(cut.Handle)
		m.regMu.Unlock()
	}()
	errs := m.callTruncate(ctx, cut, to)
	if !slices.Contains(errs, nil) {
		return chunkfs.E("truncate", p, chunkfs.KindUnavailable, "no live replica of the chunk holding the new end could be cut; retry the truncation")
	}
	m.regMu.Lock()
	m.reg.recordTaken(cut.Handle, cut.Version, replicas, errs)
	m.regMu.Unlock()
	if _, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpSetVersion, Handle: cut.Handle, Version: cut.Version}); err != nil {
		// The replicas that took the cut are ahead of the log; a
		// registration adopts their version.
		m.cfg.Logger.WarnContext(ctx, "logging a truncated chunk's version failed", "handle", cut.Handle, "err", err)
		return err
	}
	m.regMu.Lock()
	m.reg.forgetFailed(cut.Handle, replicas, errs, m.cfg.Clock.Now())
	m.regMu.Unlock()
	return nil
}

// callTruncate sends Truncate to every replica (at addresses to) at once.
func (m *Master) callTruncate(ctx context.Context, cut namespace.Cut, to []string) []error {
	var wg sync.WaitGroup
	errs := make([]error, len(to))
	for i, addr := range to {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.truncateCall(ctx, addr, cut)
		}()
	}
	wg.Wait()
	return errs
}

// shared reports whether chunk h is held by more than one file (a
// snapshot's): no lease is granted on it.
func (m *Master) shared(h chunkfs.Handle) bool {
	var n int
	m.state.read(func(ns *namespace.Namespace) { n = ns.Refs(h) })
	return n > 1
}

// currentVersion returns chunk h's logged version, 0 if it does not exist.
func (m *Master) currentVersion(h chunkfs.Handle) chunkfs.Version {
	var v chunkfs.Version
	m.state.read(func(ns *namespace.Namespace) { v, _ = ns.ChunkVersion(h) })
	return v
}
