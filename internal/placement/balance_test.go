package placement

import (
	"math/rand/v2"
	"testing"
)

// TestNewServerNotSwamped is GFS's "recent creations" rule: an empty
// server added to a cluster of fuller ones is the emptiest by far, yet a
// burst of new chunks gives it no more than about its share (the burst's
// replicas over the servers), not a replica of every chunk.
func TestNewServerNotSwamped(t *testing.T) {
	for seed := range uint64(10) {
		ss := servers(9, 3)
		for i := range ss {
			ss[i].Used, ss[i].Free = 70, 30
		}
		ss[8].Used, ss[8].Free = 0, 100 // the new one
		rng := rand.New(rand.NewPCG(seed, 5))
		const chunks = 60
		for range chunks {
			got, err := Choose(DefaultConfig(), ss, 3, rng)
			if err != nil || len(got) != 3 {
				t.Fatalf("Choose = %v, %v", got, err)
			}
			for _, i := range got {
				ss[i].Recent++
			}
		}
		share := float64(chunks*3) / float64(len(ss))
		if n := ss[8].Recent; n > share+2 || n < share-2 {
			t.Errorf("seed %d: the new server took %v of %d replicas, want about its share %.0f", seed, n, chunks*3, share)
		}
	}
}

func TestBalanceMoves(t *testing.T) {
	ss := servers(4, 4)
	for i, u := range []int64{60, 60, 48, 0} {
		ss[i].Used, ss[i].Free = u, 100-u
	}
	// Mean 42 %: cs00 and cs01 are over by more than 10 points and cs03
	// under; cs02 is above the mean, so it may give to cs03 (under) but
	// nobody gives to a server above the mean.
	got := BalanceMoves(DefaultConfig(), ss, 0.10, 2)
	want := []Move{{0, 3}, {1, 3}, {2, 3}}
	if len(got) != len(want) {
		t.Fatalf("moves %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("moves %v, want %v", got, want)
		}
	}
	// A target at the clone limit, or with no room, takes nothing.
	ss[3].Clones = 2
	if got := BalanceMoves(DefaultConfig(), ss, 0.10, 2); len(got) != 0 {
		t.Errorf("moves %v to a server at the clone limit", got)
	}
	// Within the threshold: balanced.
	for i := range ss {
		ss[i].Used, ss[i].Clones = 40+int64(i), 0
	}
	if got := BalanceMoves(DefaultConfig(), ss, 0.10, 2); len(got) != 0 {
		t.Errorf("moves %v in a balanced cluster", got)
	}
	if mean, spread := Utilisation(ss); mean < 0.41 || mean > 0.42 || spread < 0.029 || spread > 0.031 {
		t.Errorf("Utilisation = %v, %v; want 0.415, 0.03", mean, spread)
	}
}

func TestKeepsSpread(t *testing.T) {
	for _, tc := range []struct {
		racks    []string
		from, to string
		want     bool
	}{
		{[]string{"r1", "r2", "r3"}, "r1", "r1", true},
		{[]string{"r1", "r2", "r3"}, "r1", "r4", true},
		{[]string{"r1", "r2", "r3"}, "r2", "r1", false},
		{[]string{"r1", "r1", "r2"}, "r1", "r3", true},
		{[]string{"r1", "r1", "r2"}, "r2", "r1", false},
		{[]string{"r1", "r1", "r2"}, "r1", "r1", true},
	} {
		if got := KeepsSpread(tc.racks, tc.from, tc.to); got != tc.want {
			t.Errorf("KeepsSpread(%v, %s, %s) = %v, want %v", tc.racks, tc.from, tc.to, got, tc.want)
		}
	}
}
