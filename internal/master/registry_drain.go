package master

import "github.com/chunkfs/chunkfs"

// Server states as reports show them.
const (
	stateLive            = "live"
	stateDead            = "dead"
	stateDecommissioning = "decommissioning"
	stateDecommissioned  = "decommissioned"
)

// setDraining makes ids the chunkservers being decommissioned (the
// logged intent, namespace.Draining). A drained server gets no new
// replica (chunk, clone or move), and its replicas do not count towards a
// chunk's replication, so plan clones each chunk it holds elsewhere; they
// are still read and written, and never trimmed, so no chunk loses a
// replica before it has its replication without them. The chunks of a
// server whose state changes are looked at again by the next plan.
func (r *registry) setDraining(ids []string) {
	next := make(map[string]bool, len(ids))
	for _, id := range ids {
		next[id] = true
	}
	for id, s := range r.servers {
		if next[id] != r.drain[id] {
			for h := range s.chunks.all() {
				r.markDirty(h)
			}
		}
	}
	r.drain = next
}

// draining reports whether s is being decommissioned.
func (r *registry) draining(s *server) bool { return r.drain[s.id] }

// counted returns the live replicas of h at version v that count towards
// its replication: those on servers not being decommissioned.
func (r *registry) counted(h chunkfs.Handle, v chunkfs.Version) []*server {
	var out []*server
	for _, s := range r.replicas(h, v) {
		if !r.draining(s) {
			out = append(out, s)
		}
	}
	return out
}

// drainProgress is how far the decommissioning of one server is.
type drainProgress struct {
	state     string
	chunks    int // replicas it holds
	remaining int // of those, chunks with fewer counted replicas than their replication
}

// progress describes server s: live or dead, and for one being
// decommissioned, how many of its chunks still lack their replication
// elsewhere; none left, it is decommissioned and safe to remove. A dead
// server shows dead: its replicas are gone from the record (repair clones
// them like any dead server's).
func (r *registry) progress(s *server, lookup chunkLookup) drainProgress {
	p := drainProgress{state: stateLive, chunks: s.chunks.len()}
	switch {
	case !s.alive:
		p.state = stateDead
	case r.draining(s):
		for h, v := range s.chunks.all() {
			cur, want, _, _, ok := lookup(h)
			if ok && v == cur && len(r.counted(h, cur)) < want {
				p.remaining++
			}
		}
		p.state = stateDecommissioning
		if p.remaining == 0 {
			p.state = stateDecommissioned
		}
	}
	return p
}

// serverNamed returns the server whose ID or address is name, nil if none.
func (r *registry) serverNamed(name string) *server {
	if s := r.servers[name]; s != nil {
		return s
	}
	return r.byAddr[name]
}
