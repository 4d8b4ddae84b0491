package master

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// lockAllStripes takes every allocation stripe, then every lease stripe
// (the master's lock order), and returns their release.
func (m *Master) lockAllStripes() func() {
	for i := range m.allocMu {
		m.allocMu[i].Lock()
	}
	for i := range m.leaseMu {
		m.leaseMu[i].Lock()
	}
	return func() {
		for i := range m.leaseMu {
			m.leaseMu[i].Unlock()
		}
		for i := range m.allocMu {
			m.allocMu[i].Unlock()
		}
	}
}

// revokeLeases ends the leases on handles as the registry decides
// (snapshotLeases) and returns how many it revoked; op and src name the
// caller and its subject in errors. The lease stripes are held by the
// caller.
func (m *Master) revokeLeases(ctx context.Context, op, src string, handles []chunkfs.Handle) (int, error) {
	now := m.cfg.Clock.Now()
	pause, floor := m.lead.leaseHold()
	m.regMu.Lock()
	handles = m.reg.leaseCandidates(handles, pause, floor, now)
	m.regMu.Unlock()
	var plan snapshotPlan
	if len(handles) > 0 {
		m.state.read(func(ns *namespace.Namespace) {
			m.regMu.Lock()
			defer m.regMu.Unlock()
			plan = m.reg.snapshotLeases(handles, ns.ChunkVersion, pause, floor, now)
		})
	}
	if !plan.wait.IsZero() {
		return 0, chunkfs.E(op, src, chunkfs.KindUnavailable,
			"a lease on one of its chunks cannot be revoked (its primary is unreachable, or a previous master gave it) and ends in "+
				plan.wait.Sub(now).Round(time.Second).String()+"; retry then")
	}
	for _, h := range plan.revoke {
		if err := m.revokeLease(ctx, op, src, h); err != nil {
			return 0, err
		}
	}
	return len(plan.revoke), nil
}

// revokeLease ends the lease on chunk h by moving every replica the
// master counts to the next version with no lease (tell, then log, as a
// grant does). The lease record is dropped only when a replica took the
// new version; when none did, the lease stands and the snapshot waits.
func (m *Master) revokeLease(ctx context.Context, op, src string, h chunkfs.Handle) error {
	cur := m.currentVersion(h)
	m.regMu.Lock()
	v := m.reg.nextVersion(h, cur)
	m.reg.beginCalls(h, v)
	replicas := m.reg.replicas(h, cur)
	to := addrs(replicas)
	m.regMu.Unlock()
	defer func() {
		m.regMu.Lock()
		m.reg.endCalls(h)
		m.regMu.Unlock()
	}()
	errs := m.callLease(ctx, namespace.Chunk{Handle: h, Version: v}, to, false, 0)
	took := 0
	for _, err := range errs {
		if err == nil {
			took++
		}
	}
	if took == 0 {
		return chunkfs.E(op, src, chunkfs.KindUnavailable, fmt.Sprintf("no replica of chunk %d took the revocation of its lease; retry", h))
	}
	m.regMu.Lock()
	m.reg.revoke(h)
	m.reg.recordTaken(h, v, replicas, errs)
	m.regMu.Unlock()
	if _, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpSetVersion, Handle: h, Version: v}); err != nil {
		return err // the replicas are ahead of the log: a registration adopts their version
	}
	m.regMu.Lock()
	m.reg.forgetFailed(h, replicas, errs, m.cfg.Clock.Now())
	m.regMu.Unlock()
	return nil
}

// errShared tells PrepareWrite that the chunk it was about to lease is
// shared with a snapshot: it must be copied first.
var errShared = chunkfs.E("prepare write", "", chunkfs.KindUnavailable, "the chunk is shared with a snapshot; retry")

// copyOnWrite gives the file at p its own copy of chunk ch, which a
// snapshot shares (GFS §3.4): under the file's allocation stripe and the
// chunk's lease stripe, the master reserves a new handle through the log,
// has every live replica of ch copy it locally under that handle, and
// then logs that the file holds the copy. A replica that fails the copy is
// left out, as a failed replica is (re-replication heals the copy); with no
// copy made nothing is logged. The copy is made before it is logged: a
// crash in between leaves an unnamed replica, which is garbage, never a
// named chunk without replicas. It returns the file's chunk at ch.Index
// after, which is no longer shared.
func (m *Master) copyOnWrite(ctx context.Context, c chunkfs.Caller, p string, ch namespace.Chunk) (namespace.Chunk, error) {
	amu := &m.allocMu[pathStripe(p)]
	amu.Lock()
	defer amu.Unlock()
	lmu := &m.leaseMu[handleStripe(ch.Handle)]
	lmu.Lock()
	defer lmu.Unlock()
	cur, fi, ok, err := m.lookupChunk(c, p, ch.Index)
	if err != nil || !ok || cur.Handle != ch.Handle || !cur.Shared {
		return cur, err // another writer copied it meanwhile, or it went
	}
	now := m.cfg.Clock.Now()
	m.regMu.Lock()
	replicas := m.reg.replicas(cur.Handle, cur.Version)
	to := addrs(replicas)
	leased := m.reg.leaseOutstanding(cur.Handle, now)
	m.regMu.Unlock()
	empty := len(replicas) == 0 && fi.Length <= cur.Index*m.chunkSize() // never written: nothing to copy
	switch {
	case leased:
		return cur, chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "a lease on the shared chunk has not ended; retry")
	case len(replicas) == 0 && !empty:
		return cur, chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "no live replica of the shared chunk to copy; retry")
	}
	r, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpReserveHandle})
	if err != nil {
		return cur, err
	}
	nh := r.Chunk.Handle
	m.regMu.Lock()
	m.reg.beginCopy(nh, cur.Version)
	m.regMu.Unlock()
	defer func() {
		m.regMu.Lock()
		m.reg.endCopy(nh)
		m.regMu.Unlock()
	}()
	errs := m.callCopy(ctx, cur, nh, to)
	took := 0
	for _, err := range errs {
		if err == nil {
			took++
		}
	}
	if took == 0 && !empty {
		return cur, chunkfs.E("prepare write", p, chunkfs.KindUnavailable, "no replica could copy the shared chunk: "+errs[0].Error())
	}
	m.regMu.Lock()
	m.reg.recordTaken(nh, cur.Version, replicas, errs)
	m.regMu.Unlock()
	res, _, err := m.apply(ctx, &namespace.Command{Op: namespace.OpCopyChunk, Caller: c, Path: p, Handle: cur.Handle, NewHandle: nh, Version: cur.Version})
	now = m.cfg.Clock.Now()
	m.regMu.Lock()
	defer m.regMu.Unlock()
	if err != nil {
		for i, s := range replicas {
			if errs[i] == nil {
				m.reg.condemn(s, nh, now) // an unnamed copy: garbage
			}
		}
		return cur, err
	}
	m.reg.forgetFailed(nh, replicas, errs, now)
	m.cfg.Logger.InfoContext(ctx, "copied a shared chunk for a write", "path", p, "index", cur.Index, "handle", cur.Handle, "copy", nh, "replicas", took)
	return res.Chunk, nil
}

// callCopy sends CopyChunk to every replica (at addresses to) at once.
func (m *Master) callCopy(ctx context.Context, ch namespace.Chunk, nh chunkfs.Handle, to []string) []error {
	errs := make([]error, len(to))
	var wg sync.WaitGroup
	for i, addr := range to {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.copyCall(ctx, addr, ch, nh)
		}()
	}
	wg.Wait()
	return errs
}
