package master

import (
	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// Figures is what a master reports to its metrics and status page, beyond
// the cluster report: its Raft state, leases and the heap its namespace
// takes. It is computed when asked, by the same code as ClusterReport.
type Figures struct {
	Files, Dirs, Chunks, Bytes                     int64
	UnderReplicated, Missing, BeingCloned, Corrupt int64
	LiveServers, DeadServers                       int
	RepairRate                                     float64 // bytes a second cloned over the last minute
	Repaired                                       int64   // clones completed since start
	SafeMode                                       bool
	Role                                           string // leader, follower, observer or standalone
	Applied                                        uint64 // last applied log index
	Commit                                         uint64 // commit index this master knows
	Leases                                         int    // chunks with a lease valid now
	Replicas                                       int64  // replicas on live chunkservers
	MetadataBytes                                  int64  // heap bytes of the namespace and the chunk registry, estimated (metadataBytes, registryBytes)
	// ReadBytes and WrittenBytes are the chunk data chunkservers report
	// having served and received since this master started, every
	// replica counted (traffic.go): Table 3's read and write rates.
	ReadBytes, WrittenBytes int64
}

// Figures computes the master's figures now.
func (m *Master) Figures() Figures {
	rep := m.clusterReport()
	f := Figures{Files: rep.live.Files, Dirs: rep.live.Dirs, Chunks: rep.live.Chunks, Bytes: rep.live.Bytes,
		UnderReplicated: rep.underReplicated, Missing: rep.missing, BeingCloned: rep.beingCloned, Corrupt: rep.corrupt,
		RepairRate: rep.repairRate, Repaired: rep.repaired, SafeMode: rep.safeMode,
		Role: m.role(), Applied: m.log.LastApplied(), Commit: m.log.CommitIndex()}
	for _, s := range rep.servers {
		if s.alive {
			f.LiveServers++
		} else {
			f.DeadServers++
		}
	}
	f.ReadBytes, f.WrittenBytes = m.traffic.totals()
	// What the trash holds stays in the heap until it is purged.
	f.MetadataBytes = metadataBytes(namespace.Counts{Files: rep.live.Files + rep.dead.Files,
		Dirs: rep.live.Dirs + rep.dead.Dirs, Chunks: rep.live.Chunks + rep.dead.Chunks})
	now := m.cfg.Clock.Now()
	m.regMu.Lock()
	defer m.regMu.Unlock()
	f.MetadataBytes += registryBytes(m.reg.sizes())
	for h := range m.reg.leases {
		if m.reg.leased(h, now) {
			f.Leases++
		}
	}
	for h, ci := range m.reg.chunks.all() {
		for s := range m.reg.holders(h, ci) {
			if s.alive {
				f.Replicas++
			}
		}
	}
	return f
}

// Bytes of master heap per namespace object, measured by
// TestMetadataBytesMeasured: runtime.MemStats.HeapAlloc after a full
// collection, before and after building namespaces of 10,000 to 20,000
// files with names of about 16 bytes, divided out. They include the
// inode, its directory entry and name, and the chunk table's entry.
const (
	heapPerFile  = 110
	heapPerDir   = 250
	heapPerChunk = 27
)

// metadataBytes is the heap a namespace of counts c takes: GFS's
// "metadata at master" (Table 2). The namespace keeps no byte count of
// its own, so the figure is the measured cost of each object times the
// objects there are.
func metadataBytes(c namespace.Counts) int64 {
	return c.Files*heapPerFile + c.Dirs*heapPerDir + c.Chunks*heapPerChunk
}

// Bytes of master heap per registry object, measured by
// TestRegistryBytesMeasured alike: a chunk's record (its chunkInfo, by
// value in its chunkTable page, with its page's share) and a replica
// (its entry in its server's replicaSet: 2 bytes where its page's
// replicas share a version, as chunks written once do; 6 where not).
const (
	heapPerChunkRecord = 15
	heapPerReplica     = 2
)

// registryBytes is the heap a registry of records chunk records and
// replicas replicas takes: the rest of "metadata at master", beside the
// namespace (metadataBytes). It leaves out what varies with activity
// (leases, clones, queued garbage, safe mode's count).
func registryBytes(records, replicas int64) int64 {
	return records*heapPerChunkRecord + replicas*heapPerReplica
}

// ChunkProblem is a chunk that needs repair or attention: fewer live
// replicas than its file's replication, none at all, a corrupt replica, or
// a clone in flight.
type ChunkProblem struct {
	Handle  chunkfs.Handle
	Version chunkfs.Version
	Live    int // live current replicas
	Want    int // the file's replication
	Corrupt int // corrupt replicas reported and not yet replaced
	Source  string
	Target  string // a clone in flight: from Source to Target
}

// Problems returns up to limit chunks in need of repair, in handle order:
// the repair queue as the status page shows it.
func (m *Master) Problems(limit int) []ChunkProblem {
	var out []ChunkProblem
	m.state.read(func(ns *namespace.Namespace) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		size := ns.ChunkSize()
		ns.EachChunk(func(h chunkfs.Handle, v chunkfs.Version, repl int) {
			hl := m.reg.health(h, v)
			if len(out) >= limit || (hl.live >= repl && !hl.cloning && hl.corrupt == 0) || (hl.live == 0 && !holdsData(ns, h, size)) {
				return
			}
			p := ChunkProblem{Handle: h, Version: v, Live: hl.live, Want: repl, Corrupt: hl.corrupt}
			if pc := m.reg.clones[h]; hl.cloning && pc != nil {
				p.Source, p.Target = pc.source.addr, pc.target.addr
			}
			out = append(out, p)
		})
	})
	return out
}
