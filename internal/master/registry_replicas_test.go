package master

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/chunkfs/chunkfs"
)

// TestReplicaSetMatchesMap runs random sets, removals, look-ups and fits
// on a replicaSet and a map side by side: handles bunched in a few pages
// and spread over many, versions mostly one (pages with a common version
// and odd ones) or all over (pages keeping every version), small and
// above 32 bits.
func TestReplicaSetMatchesMap(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 1))
		spread := []uint64{1 << 10, 1 << 18, 1 << 40}[seed%3]
		mostlyOne := seed%2 == 0
		var rs replicaSet
		want := map[chunkfs.Handle]chunkfs.Version{}
		for range 5000 {
			h := chunkfs.Handle(rng.Uint64N(spread))
			switch op := rng.IntN(100); {
			case op == 0:
				rs.fit()
			case op < 50:
				v := chunkfs.Version(rng.Uint64N(10) + 1)
				if mostlyOne && rng.IntN(10) > 0 {
					v = 1
				}
				if rng.IntN(20) == 0 {
					v = math.MaxUint32 - 1 + chunkfs.Version(rng.Uint64N(3)) // around the sentinel
				}
				rs.set(h, v)
				want[h] = v
			case op < 80:
				rs.remove(h)
				delete(want, h)
			default:
				v, ok := rs.get(h)
				w, wok := want[h]
				if v != w || ok != wok || rs.has(h) != wok || rs.at(h) != w {
					t.Fatalf("seed %d: get(%d) = %d, %v; want %d, %v", seed, h, v, ok, w, wok)
				}
			}
		}
		got := maps.Collect(rs.all())
		if !maps.Equal(got, want) || rs.len() != len(want) {
			t.Fatalf("seed %d: set holds %d (len %d), map %d", seed, len(got), rs.len(), len(want))
		}
		handles := slices.Collect(maps.Keys(got))
		slices.Sort(handles)
		var order []chunkfs.Handle
		for h := range rs.all() {
			order = append(order, h)
		}
		if !slices.Equal(order, handles) {
			t.Fatalf("seed %d: all() is not in handle order", seed)
		}
		for h := range want {
			rs.remove(h)
		}
		if rs.len() != 0 || len(rs.pages) != 0 || rs.big != nil {
			t.Fatalf("seed %d: emptied set keeps %d replicas, %d pages, big %v", seed, rs.len(), len(rs.pages), rs.big)
		}
	}
}

// TestChunkTableMatchesMap runs random puts and removals on a chunkTable
// and a map side by side, and checks that all yields every record once,
// in handle order, when records are removed as it runs.
func TestChunkTableMatchesMap(t *testing.T) {
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 2))
		spread := []uint64{600, 1 << 14, 1 << 40}[seed%3]
		var tab chunkTable
		want := map[chunkfs.Handle]uint32{} // each record's told, as a mark of its own
		for i := range uint32(5000) {
			h := chunkfs.Handle(rng.Uint64N(spread))
			_, had := want[h]
			switch {
			case rng.IntN(3) > 0 && !had:
				tab.add(h).told = i + 1
				want[h] = i + 1
			case rng.IntN(2) == 0:
				tab.remove(h)
				delete(want, h)
			}
			ci := tab.get(h)
			told, ok := want[h]
			if (ci != nil) != ok || ci != nil && ci.told != told {
				t.Fatalf("seed %d: get(%d) differs from the map", seed, h)
			}
		}
		if tab.len() != len(want) {
			t.Fatalf("seed %d: table holds %d, map %d", seed, tab.len(), len(want))
		}
		var seen []chunkfs.Handle
		for h, ci := range tab.all() {
			if want[h] != ci.told {
				t.Fatalf("seed %d: all yields %d's record wrong", seed, h)
			}
			seen = append(seen, h)
			tab.remove(h) // emptying pages as it runs
		}
		if !slices.IsSorted(seen) || len(seen) != len(want) || tab.len() != 0 || len(tab.pages) != 0 {
			t.Fatalf("seed %d: all yielded %d of %d (sorted %v); %d left in %d pages", seed, len(seen), len(want), slices.IsSorted(seen), tab.len(), len(tab.pages))
		}
	}
}

// TestHoldersMatchSlice adds and removes servers at random among a
// chunk's holders and in a slice, and checks they hold the same, in
// order, beyond the three kept in the record too; a slot given back is
// given again.
func TestHoldersMatchSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	r := newRegistry(1)
	servers := make([]*server, 7)
	for i := range servers {
		servers[i] = &server{id: string(rune('a' + i))}
	}
	const h = chunkfs.Handle(77)
	ci := r.info(h)
	var want []*server
	for range 5000 {
		s := servers[rng.IntN(len(servers))]
		if rng.IntN(2) == 0 {
			r.addHolder(h, ci, s)
			if !slices.Contains(want, s) {
				want = append(want, s)
			}
		} else {
			gone := r.removeHolder(h, ci, s)
			if gone != slices.Contains(want, s) {
				t.Fatalf("remove(%s) = %v", s.id, gone)
			}
			want = slices.DeleteFunc(want, func(x *server) bool { return x == s })
		}
		if got := r.appendHolders(nil, h, ci); !slices.Equal(got, want) || r.holderCount(h, ci) != len(want) || r.holds(h, ci, s) != slices.Contains(want, s) {
			t.Fatalf("holders %d servers, want %d in order", r.holderCount(h, ci), len(want))
		}
		if (len(r.more) > 0) != (len(want) > 3) {
			t.Fatalf("%d holders, %d kept beside the record", len(want), len(r.more[h]))
		}
	}
	for _, s := range servers {
		r.removeHolder(h, ci, s)
		r.freeSlot(s)
	}
	extra := &server{id: "x"}
	if slot := r.slotOf(extra); slot == 0 || int(slot) > len(servers) || len(r.slots) != len(servers) {
		t.Fatalf("a new server got slot %d of a table of %d, not one given back", slot, len(r.slots))
	}
}
