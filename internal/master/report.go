package master

import (
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// clusterReport is the cluster as the master sees it at one state ID:
// what ClusterReport answers and Figures sums.
type clusterReport struct {
	stateID                                        uint64
	live, dead                                     namespace.Counts // files, directories, chunks and bytes; dead: what the trash holds
	chunkSize                                      int64
	underReplicated, missing, beingCloned, corrupt int64
	missingHeldBack                                int64   // of the missing, those whose only known copies are held back
	repairRate                                     float64 // bytes a second cloned over the last minute
	repaired                                       int64   // clones completed since the master started
	safeMode, safeModeHeld                         bool
	safeModeReason                                 string
	balance                                        balanceStatus
	servers                                        []serverStatus
}

// serverStatus is one chunkserver in a cluster report.
type serverStatus struct {
	id, addr, rack       string
	capacity, used, free int64
	disks                []disk
	load                 int32
	chunks               int64
	alive                bool
	sinceBeat            time.Duration // since its last heartbeat
	state                string        // live, dead, decommissioning or decommissioned
	drainRemaining       int64         // decommissioning: chunks not yet replicated elsewhere
}

// clusterReport summarises chunkservers (with their decommissioning
// state), the namespace, replication health, re-replication, the
// rebalancer and safe mode.
func (m *Master) clusterReport() clusterReport {
	var rep clusterReport
	now := m.cfg.Clock.Now()
	rep.safeMode, rep.safeModeReason, rep.safeModeHeld = m.safeModeStatus()
	rep.stateID = m.state.read(func(ns *namespace.Namespace) {
		rep.live, rep.dead, rep.chunkSize = ns.Counts(), ns.DeadCounts(), ns.ChunkSize()
		m.regMu.Lock()
		defer m.regMu.Unlock()
		ns.EachChunk(func(h chunkfs.Handle, v chunkfs.Version, repl int) {
			rep.addHealth(m.reg.health(h, v), repl, ns, h)
		})
		rep.repairRate, rep.repaired = m.reg.repairRate(now), m.reg.repaired
		m.reg.setDraining(ns.Draining())
		rep.balance = m.reg.balanceStatus(m.cfg.Placement, now)
		lookup := lookupIn(ns)
		for _, s := range m.reg.sorted() {
			p := m.reg.progress(s, lookup)
			rep.servers = append(rep.servers, serverStatus{
				id: s.id, addr: s.addr, rack: s.rack, capacity: s.capacity, used: s.used, free: s.free,
				disks: s.disks, load: s.load, chunks: int64(s.chunks.len()), alive: s.alive,
				sinceBeat: now.Sub(s.lastBeat), state: p.state, drainRemaining: int64(p.remaining),
			})
		}
	})
	return rep
}

// addHealth counts one chunk of replication repl whose replicas are hl.
func (rep *clusterReport) addHealth(hl chunkHealth, repl int, ns *namespace.Namespace, h chunkfs.Handle) {
	switch {
	case hl.live == 0 && !holdsData(ns, h, rep.chunkSize):
	case hl.live == 0:
		rep.missing++
		if missingHeldBack(hl, ns, h) {
			rep.missingHeldBack++
		}
	case hl.live < repl:
		rep.underReplicated++
	}
	if hl.cloning {
		rep.beingCloned++
	}
	rep.corrupt += int64(hl.corrupt)
}

// missingHeldBack reports whether chunk h, whose replicas are hl, has no
// live replica and some held back, by this registry or by the log: its
// only known copies may lack acknowledged writes, and the operator is
// told so (fsck, report).
func missingHeldBack(hl chunkHealth, ns *namespace.Namespace, h chunkfs.Handle) bool {
	return hl.live == 0 && (hl.heldBack || ns.HeldBackOf(h) != nil)
}
