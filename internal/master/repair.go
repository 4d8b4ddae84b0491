package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// repairLoop plans re-replication, trimming and the balancer's moves every
// RepairInterval (registry.plan) and starts the clones it decides.
func (m *Master) repairLoop() {
	defer m.bg.Done()
	t := m.cfg.Clock.NewTicker(m.cfg.RepairInterval)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-m.stop:
			return
		case <-t.C():
			m.repairOnce(n%fullSweepEvery == 0)
		}
	}
}

// fullSweepEvery is how many repair rounds pass between two that look at
// every chunk rather than those whose replicas changed (registry.plan):
// the sweep finds chunks whose file's replication was raised.
const fullSweepEvery = 30

// repairOnce runs one round of planning: nothing while in safe mode, when
// locations are still being learnt, nor while the chunkservers that were
// not needed to leave it register (settling).
func (m *Master) repairOnce(full bool) {
	m.updateSafeMode(true)
	m.syncDraining()
	if !m.leads() {
		return // only the leader re-replicates and trims
	}
	if safe, _, _ := m.safeModeStatus(); safe {
		return
	}
	if m.settling(m.cfg.Clock.Now()) {
		return
	}
	// With --min-replicas 1 the one replica takes writes: a writer would
	// get a new lease, at a version past the clone's, as soon as this one
	// was revoked, and each round would revoke it again. The lease is
	// waited out there. A lost primary's lease is fenced whatever the
	// minimum: it happens once, and frees its writer too.
	revoke, fence, leave := m.planRepairs(full)
	revoked := len(revoke) > 0 && m.cfg.MinReplicas > 1 && m.revokeForRepair(revoke)
	fenced := m.fenceForRepair(fence)
	if moved := m.leaveBehind(leave); revoked || fenced || moved {
		m.planRepairs(false) // the chunks whose lease was revoked or fenced, or that moved on, are cloned now
	}
}

// planRepairs plans once and starts the clones decided; it returns the
// chunks held back by a lease the master is to revoke (registry.revoking),
// those held back by a lost primary's lease it is to fence
// (registry.fencing) and those whose replicas held back it is to leave
// stale (registry.leaving).
func (m *Master) planRepairs(full bool) (revoke, fence, leave []chunkfs.Handle) {
	now := m.cfg.Clock.Now()
	// The round lets both locks go between slices of chunks
	// (registry.planIn): a sweep of every chunk, or of the many a
	// registration storm dirtied, then holds up no heartbeat, apply or
	// read for longer than a slice.
	ns := m.state.rlock()
	m.regMu.Lock()
	pause := func() chunkLookup {
		m.regMu.Unlock()
		m.state.runlock()
		ns = m.state.rlock()
		m.regMu.Lock()
		return lookupIn(ns)
	}
	orders, trims := m.reg.planIn(m.cfg.Placement, lookupIn(ns), m.cfg.MaxClonesPerServer, now, full, pause)
	for _, o := range orders {
		m.event(CloneEvent{Handle: o.handle, Version: o.version, Live: o.live, Source: o.sourceAddr, Target: o.targetAddr, Move: o.move})
	}
	revoke, fence, leave = slices.Clone(m.reg.revoking), slices.Clone(m.reg.fencing), slices.Clone(m.reg.leaving)
	m.regMu.Unlock()
	m.state.runlock()
	for _, t := range trims {
		m.cfg.Logger.Info("trimming an excess replica", "handle", t.handle, "server", t.server.id)
	}
	for _, o := range orders {
		m.bg.Add(1)
		go m.runClone(o)
	}
	return revoke, fence, leave
}

// revokeForRepair revokes the leases on handles, chunks down to the
// primary's replica, as a snapshot does (revokeLeases: the replicas move
// to the next version with no lease, under the chunk's lease stripe, so
// no writer is granted one meanwhile), and reports whether any was. The
// chunk then has fewer live replicas than a write needs (MinReplicas > 1)
// and takes no new lease until its clone is counted (were one granted
// during the clone, it would move the version past the one cloned, and
// the clone would not be counted). A lease that cannot be revoked is
// waited out.
func (m *Master) revokeForRepair(handles []chunkfs.Handle) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*m.cfg.RPCTimeout)
	defer cancel()
	revoked := false
	for _, h := range handles {
		mu := &m.leaseMu[handleStripe(h)]
		mu.Lock()
		n, err := m.revokeLeases(ctx, "repair", fmt.Sprintf("chunk %d", h), []chunkfs.Handle{h})
		mu.Unlock()
		if err != nil {
			m.cfg.Logger.Warn("a lease holding back the repair of a chunk's last replica was not revoked", "handle", h, "err", err)
			continue
		}
		if n > 0 {
			m.cfg.Logger.Info("lease revoked to re-replicate a chunk's last replica", "handle", h)
			revoked = true
		}
	}
	return revoked
}

// fenceForRepair fences off the lost primaries of handles, chunks down to
// one live replica under a lease whose primary the master lost
// (registry.fenceable): as a revocation does, the replica left moves to
// the next version with no lease, logged, under the chunk's lease stripe.
// The primary, should it be alive, cannot get a write acknowledged after
// that: it needs every replica of its chain, and the one left rejects a
// mutation at the old version. So the chunk is cloned at once, not a lease
// later, and a writer gets a new lease at a version past the clone's once
// the clone is counted (below the minimum of replicas it takes none
// before). It reports whether any chunk was fenced. A chunk below the
// hold of a master that restarted or took over is left to it.
func (m *Master) fenceForRepair(handles []chunkfs.Handle) bool {
	if len(handles) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*m.cfg.RPCTimeout)
	defer cancel()
	fenced := false
	for _, h := range handles {
		mu := &m.leaseMu[handleStripe(h)]
		mu.Lock()
		ok, err := m.fenceLost(ctx, h)
		mu.Unlock()
		switch {
		case err != nil:
			m.cfg.Logger.Warn("the lease of a lost primary holding back the repair of a chunk's last replica was not fenced", "handle", h, "err", err)
		case ok:
			m.cfg.Logger.Info("lost primary fenced off to re-replicate a chunk's last replica", "handle", h)
			fenced = true
		}
	}
	return fenced
}

// fenceLost fences chunk h if the registry still finds its lease's
// primary lost; the caller holds h's lease stripe.
func (m *Master) fenceLost(ctx context.Context, h chunkfs.Handle) (bool, error) {
	now := m.cfg.Clock.Now()
	if pause, floor := m.lead.leaseHold(); h < floor && now.Before(pause) {
		return false, nil
	}
	cur := m.currentVersion(h)
	m.regMu.Lock()
	lost := cur != 0 && m.reg.fenceable(h, cur, now)
	m.regMu.Unlock()
	if !lost {
		return false, nil
	}
	return true, m.revokeLease(ctx, "repair", fmt.Sprintf("chunk %d", h), h)
}

// leaveBehind moves the counted replicas of handles, chunks with replicas
// held back and no lease out (registry.leftBehind), to the next version
// with no lease, logged, as a revocation does, under the chunk's lease
// stripe: the held-back replicas are stale then, deleted at their next
// report, and a clone may go to their servers. It reports whether any
// chunk moved. A chunk below the hold of a master that restarted or took
// over is left to it.
func (m *Master) leaveBehind(handles []chunkfs.Handle) bool {
	if len(handles) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*m.cfg.RPCTimeout)
	defer cancel()
	moved := false
	for _, h := range handles {
		mu := &m.leaseMu[handleStripe(h)]
		mu.Lock()
		ok, err := m.moveOn(ctx, h)
		mu.Unlock()
		switch {
		case err != nil:
			m.cfg.Logger.Warn("a chunk's replicas held back after they left under a lease were not left stale", "handle", h, "err", err)
		case ok:
			m.cfg.Logger.Info("replicas held back after they left under a lease left stale", "handle", h)
			moved = true
		}
	}
	return moved
}

// moveOn moves chunk h on if the registry still finds replicas of it left
// behind; the caller holds h's lease stripe.
func (m *Master) moveOn(ctx context.Context, h chunkfs.Handle) (bool, error) {
	now := m.cfg.Clock.Now()
	if pause, floor := m.lead.leaseHold(); h < floor && now.Before(pause) {
		return false, nil
	}
	cur := m.currentVersion(h)
	m.regMu.Lock()
	behind := cur != 0 && m.reg.leftBehind(h, cur, now)
	m.regMu.Unlock()
	if !behind {
		return false, nil
	}
	if err := m.revokeLease(ctx, "repair", fmt.Sprintf("chunk %d", h), h); err != nil {
		return false, err
	}
	m.regMu.Lock()
	m.reg.movedOn(h)
	m.regMu.Unlock()
	return true, nil
}

// syncDraining gives the registry the logged set of chunkservers being
// decommissioned, on every master: one that becomes the leader places no
// new replica on them from its first allocation.
func (m *Master) syncDraining() {
	m.state.read(func(ns *namespace.Namespace) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		m.reg.setDraining(ns.Draining())
	})
}

// lookupIn answers the registry's questions about chunks from ns.
func lookupIn(ns *namespace.Namespace) chunkLookup {
	size := ns.ChunkSize()
	return func(h chunkfs.Handle) (chunkfs.Version, int, int64, bool, bool) {
		v, ok := ns.ChunkVersion(h)
		if !ok {
			return 0, 0, 0, false, false
		}
		idx, length, repl, dead, ok := ns.ChunkFile(h)
		return v, repl, min(max(length-idx*size, 0), size), dead, ok
	}
}

// runClone tells the target to copy the chunk from the source and records
// the outcome; a clone that failed at its deadline is stalled (ranOut).
func (m *Master) runClone(o cloneOrder) {
	defer m.bg.Done()
	timeout := m.cfg.RPCTimeout + time.Duration(float64(o.length)/float64(m.cfg.MinCloneRate)*float64(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := m.cloneCall(ctx, o)
	deadline, _ := ctx.Deadline()
	if err != nil && ranOut(ctx.Err(), time.Until(deadline), timeout) {
		err = fmt.Errorf("%w after %v: %w", errStalled, timeout.Round(time.Millisecond), err)
	}
	cur := m.currentVersion(o.handle)
	m.regMu.Lock()
	ok, trimmed := m.reg.cloneDone(o.handle, o.pending, o.length, err, cur, cur != 0, m.cfg.Clock.Now())
	if err == nil && !ok {
		err = chunkfs.E("clone", "", chunkfs.KindStale, "the chunk changed while it was cloned")
	}
	m.event(CloneEvent{Handle: o.handle, Version: o.version, Live: o.live, Source: o.sourceAddr, Target: o.targetAddr, Done: true, Err: err, Move: o.move, Trimmed: trimmed})
	m.regMu.Unlock()
	switch {
	case err != nil:
		m.cfg.Logger.Warn("clone failed", "handle", o.handle, "source", o.sourceAddr, "target", o.targetAddr, "move", o.move, "err", err)
	case o.move:
		m.cfg.Logger.Info("replica moved", "handle", o.handle, "version", o.version, "source", o.sourceAddr, "target", o.targetAddr, "source_trimmed", trimmed)
	default:
		m.cfg.Logger.Info("chunk re-replicated", "handle", o.handle, "version", o.version, "source", o.sourceAddr, "target", o.targetAddr)
	}
}

// ranOut reports whether a call of the given timeout that failed, ending
// with ctxErr its context's error and left its time left, ran into its
// deadline: its context ended so, or it answered within stallMargin of
// it. A target that aborts at the deadline the call carried (gRPC sends
// it along) can answer a moment before the caller's own context ends.
func ranOut(ctxErr error, left, timeout time.Duration) bool {
	return errors.Is(ctxErr, context.DeadlineExceeded) || ctxErr == nil && left <= stallMargin(timeout)
}

// stallMargin is how near its deadline a failed call must end to have run
// into it: a tenth of its timeout, at most a second.
func stallMargin(timeout time.Duration) time.Duration { return min(timeout/10, time.Second) }

// event tells the OnClone hook, if any; the caller holds regMu, so that
// the events come in the order the registry decided them (a move's end
// before the start of the move that took its slot).
func (m *Master) event(e CloneEvent) {
	if m.cfg.OnClone != nil {
		m.cfg.OnClone(e)
	}
}
