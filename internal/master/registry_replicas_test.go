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
