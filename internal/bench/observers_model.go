package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// nameModel is what one client of the observer-reads workload knows of its
// own directory: which of its names exist, and which a write of its own is
// changing. It plans each operation on names no write is changing and
// checks each read against what the client's own acknowledged writes must
// show (read-your-writes). It is a pure state machine; the load generator
// calls it under a lock.
type nameModel struct {
	next   int              // the next new name's number
	names  map[string]*name // every name ever used
	exist  []string         // existing names that no write is changing
	gone   []string         // recently removed names no write is changing (at most maxGone)
	writes int              // writes in flight
}

// name is one name of the client's directory.
type name struct {
	exists bool
	dir    bool
	busy   bool   // a write is changing it
	ver    uint64 // bumped when a write starts and when it ends
}

// maxGone bounds the removed names a stat may expect to be absent.
const maxGone = 256

func newNameModel() *nameModel { return &nameModel{names: map[string]*name{}} }

// fresh returns a name never used.
func (m *nameModel) fresh() string {
	m.next++
	n := fmt.Sprintf("n%06d", m.next)
	m.names[n] = &name{}
	return n
}

// metaPlan is one operation planned on the model: its names and, for a
// read, what it must find.
type metaPlan struct {
	Op       MetaOp
	Name     string // create, mkdir, rename (from), delete, stat
	To       string // rename
	Dir      bool   // mkdir; delete and rename of a directory
	Exists   bool   // stat: whether Name must exist
	Snapshot map[string]snap
}

// snap is a name's state as a list saw it begin.
type snap struct {
	exists bool
	ver    uint64
}

// plan picks the names of op. A delete or rename with no name to act on
// becomes a create.
func (m *nameModel) plan(op MetaOp, r *rand.Rand) metaPlan {
	if (op == MetaDelete || op == MetaRename) && len(m.exist) == 0 {
		op = MetaCreate
	}
	p := metaPlan{Op: op}
	switch op {
	case MetaCreate, MetaMkdir:
		p.Name, p.Dir = m.fresh(), op == MetaMkdir
		m.begin(p.Name)
	case MetaDelete, MetaRename:
		p.Name = m.take(r)
		p.Dir = m.names[p.Name].dir
		m.begin(p.Name)
		if op == MetaRename {
			p.To = m.fresh()
			m.begin(p.To)
		}
	case MetaStat:
		if len(m.gone) > 0 && (len(m.exist) == 0 || r.IntN(5) == 0) {
			p.Name = m.gone[r.IntN(len(m.gone))]
		} else if len(m.exist) > 0 {
			p.Name = m.exist[r.IntN(len(m.exist))]
		}
		if p.Name != "" {
			p.Exists = m.names[p.Name].exists
			p.Snapshot = map[string]snap{p.Name: {p.Exists, m.names[p.Name].ver}}
		}
	case MetaList:
		p.Snapshot = make(map[string]snap, len(m.exist)+len(m.gone))
		for _, n := range slices.Concat(m.exist, m.gone) {
			p.Snapshot[n] = snap{m.names[n].exists, m.names[n].ver}
		}
	}
	return p
}

// take removes a random existing name from the idle ones.
func (m *nameModel) take(r *rand.Rand) string {
	i := r.IntN(len(m.exist))
	n := m.exist[i]
	m.exist[i] = m.exist[len(m.exist)-1]
	m.exist = m.exist[:len(m.exist)-1]
	return n
}

func (m *nameModel) begin(n string) {
	e := m.names[n]
	e.busy = true
	e.ver++
	m.writes++
}

// end settles name n after a write: exists is what the write left, when
// ok; a failed write leaves the name unknown, and it is no longer used.
func (m *nameModel) end(n string, ok, exists, dir bool) {
	e := m.names[n]
	e.busy = false
	e.ver++
	m.writes--
	if !ok {
		return
	}
	e.exists, e.dir = exists, dir
	if exists {
		m.exist = append(m.exist, n)
	} else {
		m.gone = append(m.gone, n)
		if len(m.gone) > maxGone {
			m.gone = m.gone[1:]
		}
	}
}

// done settles the names of write p after it ended (ok: acknowledged).
func (m *nameModel) done(p metaPlan, ok bool) {
	switch p.Op {
	case MetaCreate, MetaMkdir:
		m.end(p.Name, ok, true, p.Dir)
	case MetaDelete:
		m.end(p.Name, ok, false, p.Dir)
	case MetaRename:
		m.end(p.Name, ok, false, p.Dir)
		m.end(p.To, ok, true, p.Dir)
	}
}

// check compares what a read found with what it must have: for a stat,
// whether its name exists (found holds it when it does); for a list, the
// names listed. Only names no write of the client's touched while the read
// ran are checked. It returns the violations of read-your-writes.
func (m *nameModel) check(p metaPlan, found []string) []string {
	var bad []string
	for n, s := range p.Snapshot {
		if m.names[n].ver != s.ver {
			continue // a write overlapped the read: either answer is right
		}
		if got := slices.Contains(found, n); got != s.exists {
			bad = append(bad, fmt.Sprintf("%s %s: exists=%v, want %v", p.Op, n, got, s.exists))
		}
	}
	return bad
}
