package master

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
)

// TestSafeCountMatchesWalk checks the running count of located chunks
// against the walk of every chunk it replaces (the model): after each step
// of random registrations, heartbeats (samples, deletions, corrupt
// replicas), deaths, deleted chunks and version changes, both agree. A
// change to the namespace starts the count again, as the master does when
// the chunk generation moves.
func TestSafeCountMatchesWalk(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkSafeCount(t, seed) })
	}
}

// safeModel is a namespace for the count: each chunk's logged version,
// and whether it holds data.
type safeModel struct {
	version map[chunkfs.Handle]chunkfs.Version
	holds   map[chunkfs.Handle]bool
	gen     uint64
}

func (m *safeModel) versionOf(h chunkfs.Handle) (chunkfs.Version, bool) {
	v, ok := m.version[h]
	return v, ok
}

func (m *safeModel) want() map[chunkfs.Handle]chunkfs.Version {
	out := make(map[chunkfs.Handle]chunkfs.Version)
	for h, v := range m.version {
		if m.holds[h] {
			out[h] = v
		}
	}
	return out
}

// walk is the model: updateSafeMode's walk before the count.
func (m *safeModel) walk(r *registry) (total, located int) {
	for h, v := range m.version {
		if !m.holds[h] {
			continue
		}
		total++
		if r.health(h, v).live > 0 {
			located++
		}
	}
	return total, located
}

func checkSafeCount(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	const nChunks, nServers = 60, 6
	m := &safeModel{version: map[chunkfs.Handle]chunkfs.Version{}, holds: map[chunkfs.Handle]bool{}}
	for h := chunkfs.Handle(1); h <= nChunks; h++ {
		m.version[h] = chunkfs.Version(1 + rng.IntN(3))
		m.holds[h] = rng.IntN(5) > 0
	}
	r := newRegistry(seed)
	now := time.Unix(1000, 0)
	r.startCount(m.gen, m.want())
	handle := func() chunkfs.Handle { return chunkfs.Handle(1 + rng.IntN(nChunks+5)) } // a few never existed
	replicas := func() []replica {
		var out []replica
		for range rng.IntN(nChunks / 2) {
			h := handle()
			v := m.version[h] + chunkfs.Version(rng.IntN(3)) - 1 // stale, current or ahead
			out = append(out, replica{h, v})
		}
		return out
	}
	for step := range 400 {
		id := fmt.Sprintf("s%d", rng.IntN(nServers))
		fig := figures{id: id, addr: id + ":1", capacity: 1 << 40, free: 1 << 40}
		var what string
		switch op := rng.IntN(10); {
		case op < 3:
			what = "register " + id
			if _, err := r.register(fullReport{figures: fig, chunks: replicas()}, m.versionOf, now); err != nil {
				t.Fatal(err)
			}
		case op < 6:
			what = "heartbeat " + id
			b := beat{figures: fig, sample: replicas()}
			for range rng.IntN(3) {
				b.deleted = append(b.deleted, handle())
			}
			if rng.IntN(4) == 0 {
				b.corrupt = []chunkfs.Handle{handle()}
			}
			r.heartbeat(b, m.versionOf, now, time.Minute, rng.IntN(4) > 0)
		case op < 7:
			what = "dead"
			r.servers[id].lastBeatIfKnown(now.Add(-time.Hour))
			r.markDead(now, 30*time.Second)
		case op < 8:
			h := handle()
			what = fmt.Sprint("delete ", h)
			delete(m.version, h)
			r.forget([]chunkfs.Handle{h}, now)
			m.gen++
		case op < 9:
			h := handle()
			what = fmt.Sprint("version ", h)
			if _, ok := m.version[h]; ok {
				m.version[h]++
				m.gen++
			}
		default:
			h := handle()
			what = fmt.Sprint("length ", h)
			m.holds[h] = !m.holds[h]
			m.gen++
		}
		now = now.Add(time.Second)
		if _, _, ok := r.safeCounted(m.gen); !ok {
			r.startCount(m.gen, m.want())
		}
		total, located, _ := r.safeCounted(m.gen)
		wt, wl := m.walk(r)
		if total != wt || located != wl {
			t.Fatalf("step %d (%s): counted %d of %d located, the walk %d of %d", step, what, located, total, wl, wt)
		}
	}
}

// lastBeatIfKnown backdates s's last heartbeat, if s is known.
func (s *server) lastBeatIfKnown(at time.Time) {
	if s != nil {
		s.lastBeat = at
	}
}
