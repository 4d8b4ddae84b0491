package master

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/chunkfs/chunkfs"
)

// TestReplicaSetMatchesMap runs random sets, removals and look-ups on a
// replicaSet and a map side by side: handles bunched in a few pages and
// spread over many, versions small and above 32 bits.
func TestReplicaSetMatchesMap(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		spread := []uint64{1 << 10, 1 << 18, 1 << 40}[seed%3]
		var rs replicaSet
		want := map[chunkfs.Handle]chunkfs.Version{}
		for range 5000 {
			h := chunkfs.Handle(rng.Uint64N(spread))
			switch op := rng.IntN(10); {
			case op < 5:
				v := chunkfs.Version(rng.Uint64N(10) + 1)
				if rng.IntN(20) == 0 {
					v = math.MaxUint32 - 1 + chunkfs.Version(rng.Uint64N(3)) // around the sentinel
				}
				rs.set(h, v)
				want[h] = v
			case op < 8:
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
		want := map[chunkfs.Handle]*chunkInfo{}
		for range 5000 {
			h := chunkfs.Handle(rng.Uint64N(spread))
			switch {
			case rng.IntN(3) > 0 && want[h] == nil:
				ci := &chunkInfo{}
				tab.put(h, ci)
				want[h] = ci
			case rng.IntN(2) == 0:
				tab.remove(h)
				delete(want, h)
			}
			if tab.get(h) != want[h] {
				t.Fatalf("seed %d: get(%d) differs from the map", seed, h)
			}
		}
		if tab.len() != len(want) {
			t.Fatalf("seed %d: table holds %d, map %d", seed, tab.len(), len(want))
		}
		var seen []chunkfs.Handle
		for h, ci := range tab.all() {
			if want[h] != ci {
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

// TestHolderSetMatchesSlice adds and removes servers at random in a
// holderSet and a slice, and checks they hold the same, in order.
func TestHolderSetMatchesSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	servers := make([]*server, 7)
	for i := range servers {
		servers[i] = &server{id: string(rune('a' + i))}
	}
	var hs holderSet
	var want []*server
	for range 5000 {
		s := servers[rng.IntN(len(servers))]
		if rng.IntN(2) == 0 {
			hs.add(s)
			if !slices.Contains(want, s) {
				want = append(want, s)
			}
		} else {
			gone := hs.remove(s)
			if gone != slices.Contains(want, s) {
				t.Fatalf("remove(%s) = %v", s.id, gone)
			}
			want = slices.DeleteFunc(want, func(x *server) bool { return x == s })
		}
		if got := hs.appendTo(nil); !slices.Equal(got, want) || hs.len() != len(want) || hs.contains(s) != slices.Contains(want, s) {
			t.Fatalf("set holds %d servers, want %d in order", hs.len(), len(want))
		}
	}
}
