package master

import (
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/token"
)

// location is where a chunk lives, as a client is told.
type location struct {
	chunk     namespace.Chunk // index, handle and current version
	replicas  []string        // live replicas at the version, the primary first
	primary   string          // the lease holder; empty when none
	leaseLeft time.Duration   // of the primary's lease, less the slack; at least a millisecond
	token     []byte          // the client's access to the chunk; nil when tokens are off
}

// fileChunks is the answer to a look-up of a file's chunks.
type fileChunks struct {
	stateID   uint64
	info      chunkfs.FileInfo
	chunkSize int64
	chunks    []location // present chunks only; holes are absent
}

// chunksOf returns, as c, where count chunks of the file at p from first
// live, with read tokens. A master that does not lead refuses when it
// knows no replica of one: it may not have heard of it yet (HDFS-13924),
// the leader has.
func (m *Master) chunksOf(c chunkfs.Caller, op, p string, first, count int64) (fileChunks, error) {
	var out fileChunks
	var err error
	now := m.cfg.Clock.Now()
	out.stateID = m.state.read(func(ns *namespace.Namespace) {
		var chunks []namespace.Chunk
		out.info, chunks, err = ns.Chunks(c, p, first, int(min(count, namespace.MaxChunkCount)), false)
		if err != nil {
			return
		}
		out.chunkSize = ns.ChunkSize()
		m.regMu.Lock()
		defer m.regMu.Unlock()
		for _, ch := range chunks {
			out.chunks = append(out.chunks, m.locationLocked(ns, ch, now))
		}
	})
	if err != nil {
		return fileChunks{}, err
	}
	if err := m.signLocations(op, p, token.Read, c.UID, out.chunks); err != nil {
		return fileChunks{}, err
	}
	if !m.leads() {
		for _, l := range out.chunks {
			if len(l.replicas) == 0 {
				return fileChunks{}, m.notLeader(op)
			}
		}
	}
	return out, nil
}

// locationLocked describes where chunk ch lives: live replicas with its
// current version, the primary first when it holds a valid lease. A
// replica the log holds back at the version (ns.IsHeldBack) is left out
// on every master: one that follows may have counted it from a report
// before it applied the fact.
func (m *Master) locationLocked(ns *namespace.Namespace, ch namespace.Chunk, now time.Time) location {
	loc := location{chunk: ch}
	held := ns.HeldBackOf(ch.Handle) != nil
	out := func(s *server) bool { return held && ns.IsHeldBack(ch.Handle, s.id, ch.Version) }
	primary, expiry := m.reg.lease(ch.Handle, now)
	if primary != nil && primary.chunks.at(ch.Handle) == ch.Version && !out(primary) {
		loc.primary = primary.addr
		loc.leaseLeft = max(expiry.Sub(now)-m.leaseSlack(), time.Millisecond)
		loc.replicas = append(loc.replicas, primary.addr)
	}
	for _, s := range m.reg.replicas(ch.Handle, ch.Version) {
		if s != primary && !out(s) {
			loc.replicas = append(loc.replicas, s.addr)
		}
	}
	return loc
}

// signLocations puts a token for uid with access on every location, when
// tokens are on. Without a key yet (a new leader has not logged one) the
// call is refused as unavailable, and the client retries.
func (m *Master) signLocations(op, path string, access token.Access, uid uint32, locs []location) error {
	if !m.cfg.tokensOn() {
		return nil
	}
	now := m.tokenClock().Now()
	for i := range locs {
		tok, err := m.state.signToken(locs[i].chunk.Handle, access, uid, now)
		if err != nil {
			return chunkfs.E(op, path, chunkfs.KindUnavailable, "no chunk access token key yet; retry")
		}
		locs[i].token = tok
	}
	return nil
}
