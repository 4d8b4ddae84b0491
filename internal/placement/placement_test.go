package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func servers(n int, racks int) []Server {
	var out []Server
	for i := range n {
		out = append(out, Server{ID: fmt.Sprintf("cs%02d", i), Rack: fmt.Sprintf("r%d", i%racks), Capacity: 100, Used: 10, Free: 90})
	}
	return out
}

func TestDistinctAndSpreadOverRacks(t *testing.T) {
	ss := servers(9, 3)
	got, err := Choose(DefaultConfig(), ss, 3, rand.New(rand.NewPCG(1, 1)))
	if err != nil || len(got) != 3 {
		t.Fatalf("Choose = %v, %v", got, err)
	}
	racks := map[string]bool{}
	for _, i := range got {
		racks[ss[i].Rack] = true
	}
	if len(racks) != 3 {
		t.Errorf("replicas on racks %v, want 3 racks", racks)
	}
	// More replicas than racks: still distinct servers.
	got, _ = Choose(DefaultConfig(), ss, 5, nil)
	seen := map[int]bool{}
	for _, i := range got {
		if seen[i] {
			t.Fatalf("server %d chosen twice: %v", i, got)
		}
		seen[i] = true
	}
	if len(got) != 5 {
		t.Errorf("got %d servers, want 5", len(got))
	}
}

func TestPrefersBelowAverageUtilisation(t *testing.T) {
	ss := servers(6, 1)
	for i := range ss {
		ss[i].Used = int64(10 * (i + 1)) // cs00 emptiest
	}
	// Average 35%; the default band admits up to 40%.
	for seed := range uint64(20) {
		got, _ := Choose(DefaultConfig(), ss, 2, rand.New(rand.NewPCG(seed, 2)))
		for _, i := range got {
			if ss[i].Used > 40 {
				t.Errorf("seed %d: chose %s at %d%% with emptier servers free", seed, ss[i].ID, ss[i].Used)
			}
		}
	}
	// Without a band, only servers at or below the average qualify.
	got, _ := Choose(Config{MaxRecent: 64}, ss, 3, rand.New(rand.NewPCG(2, 2)))
	for _, i := range got {
		if ss[i].Used > 35 {
			t.Errorf("band 0: chose %s at %d%% with emptier servers free", ss[i].ID, ss[i].Used)
		}
	}
}

// TestBurstSpreadsOverAllServers places a burst of 16 three-replica chunks
// on 16 servers the way the master does (each choice counts as a recent
// creation) and checks no server takes much more than its 3 replicas, both
// on equal and on slightly unequal usage: the slightly emptier half must
// not take the whole burst.
func TestBurstSpreadsOverAllServers(t *testing.T) {
	cases := []struct {
		name    string
		racks   int
		used    func(i int) int64
		maxEach float64
	}{
		{"equal", 1, func(int) int64 { return 40 }, 3},
		{"uneven", 1, func(i int) int64 { return 38 + int64(i%5) }, 3},
		{"uneven-racks", 4, func(i int) int64 { return 38 + int64(i%5) }, 4},
	}
	for _, tc := range cases {
		for seed := range uint64(10) {
			ss := servers(16, tc.racks)
			for i := range ss {
				ss[i].Used = tc.used(i)
			}
			rng := rand.New(rand.NewPCG(seed, 3))
			for range 16 {
				got, err := Choose(DefaultConfig(), ss, 3, rng)
				if err != nil || len(got) != 3 {
					t.Fatalf("%s: Choose = %v, %v", tc.name, got, err)
				}
				for _, i := range got {
					ss[i].Recent++
				}
			}
			for _, s := range ss {
				if s.Recent > tc.maxEach || s.Recent == 0 {
					t.Errorf("%s seed %d: %s took %v replicas of the burst, want 1..%v", tc.name, seed, s.ID, s.Recent, tc.maxEach)
				}
			}
		}
	}
}

func TestClearlyFullerServersAvoided(t *testing.T) {
	ss := servers(8, 1)
	for i := range ss {
		ss[i].Used = 40
	}
	ss[0].Used, ss[1].Used = 80, 70 // clearly above the band
	for seed := range uint64(20) {
		got, _ := Choose(DefaultConfig(), ss, 3, rand.New(rand.NewPCG(seed, 4)))
		for _, i := range got {
			if i < 2 {
				t.Errorf("seed %d: chose %s at %d%% with room elsewhere", seed, ss[i].ID, ss[i].Used)
			}
		}
	}
	if (Config{MaxRecent: 1, UtilisationBand: 1}).Validate() == nil || (Config{MaxRecent: 1, UtilisationBand: -0.1}).Validate() == nil {
		t.Error("Validate accepted a bad band")
	}
}

func TestCapsRecentCreations(t *testing.T) {
	ss := servers(4, 1)
	ss[0].Used, ss[1].Used = 0, 0 // emptiest, but busy with new chunks
	ss[0].Recent, ss[1].Recent = 5, 5
	cfg := Config{MaxRecent: 5}
	got, _ := Choose(cfg, ss, 2, nil)
	for _, i := range got {
		if i < 2 {
			t.Errorf("chose %s at the creation cap", ss[i].ID)
		}
	}
	// With nothing else left, capped servers are still used.
	got, _ = Choose(cfg, ss, 4, nil)
	if len(got) != 4 {
		t.Errorf("got %v, want all 4", got)
	}
}

func TestFullServersAndErrors(t *testing.T) {
	ss := servers(3, 1)
	ss[1].Used = 100
	ss[2].Capacity = 0
	got, err := Choose(DefaultConfig(), ss, 3, nil)
	if err != nil || !reflect.DeepEqual(got, []int{0}) {
		t.Errorf("Choose = %v, %v; want only the server with room", got, err)
	}
	if _, err := Choose(DefaultConfig(), ss[1:], 3, nil); err != ErrNoServers {
		t.Errorf("no room: %v", err)
	}
	if _, err := Choose(DefaultConfig(), nil, 3, nil); err != ErrNoServers {
		t.Errorf("no servers: %v", err)
	}
	if (Config{MaxRecent: 0}).Validate() == nil || DefaultConfig().Validate() != nil {
		t.Error("Validate")
	}
}

func TestDeterministicForSeed(t *testing.T) {
	ss := servers(20, 4)
	a, _ := Choose(DefaultConfig(), ss, 3, rand.New(rand.NewPCG(7, 7)))
	b, _ := Choose(DefaultConfig(), ss, 3, rand.New(rand.NewPCG(7, 7)))
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same seed, different choice: %v vs %v", a, b)
	}
	// Different seeds spread load over equal servers.
	seen := map[int]bool{}
	for seed := range uint64(20) {
		c, _ := Choose(DefaultConfig(), ss, 1, rand.New(rand.NewPCG(seed, 0)))
		seen[c[0]] = true
	}
	if len(seen) < 5 {
		t.Errorf("20 seeds chose only %d distinct servers", len(seen))
	}
}

func TestRecencyDecays(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := 10 * time.Second
	var r Recency
	if v := r.Value(t0, h); v != 0 {
		t.Fatalf("zero Recency = %v", v)
	}
	r.Add(t0, h)
	r.Add(t0.Add(time.Millisecond), h)
	if v := r.Value(t0.Add(time.Millisecond), h); math.Abs(v-2) > 1e-3 {
		t.Errorf("two creations at once count %v, want 2", v)
	}
	if v := r.Value(t0.Add(h), h); math.Abs(v-1) > 1e-3 {
		t.Errorf("after a half-life: %v, want 1", v)
	}
	if v := r.Value(t0.Add(100*h), h); v != 0 {
		t.Errorf("after 100 half-lives: %v, want 0", v)
	}
	// A clock stepping back does not inflate the count.
	if v := r.Value(t0.Add(-time.Hour), h); math.Abs(v-2) > 1e-3 {
		t.Errorf("earlier time: %v, want 2", v)
	}
	if (Config{MaxRecent: 1, RecentHalfLife: -1}).Validate() == nil {
		t.Error("Validate accepted a negative half-life")
	}
}

// TestBurstAfterUnevenBurst places a burst of 8 chunks (24 replicas on 16
// servers: half the servers take two) and, 30 s later, a burst of 16
// chunks, counting creations as the master does. The second burst must put
// exactly 3 replicas on every server: the first burst's uneven counts have
// decayed to tie-breakers. (With a window reset between the bursts a
// window count would do the same, but a reset inside a burst, or no reset
// at all, piled 4 or 5 replicas of the second burst on some servers.)
func TestBurstAfterUnevenBurst(t *testing.T) {
	cfg := DefaultConfig()
	for seed := range uint64(10) {
		ss := servers(16, 1)
		rec := make([]Recency, len(ss))
		rng := rand.New(rand.NewPCG(seed, 5))
		now := time.Unix(5000, 0)
		burst := func(chunks int) map[int]int {
			got := map[int]int{}
			for range chunks {
				for i := range ss {
					ss[i].Recent = rec[i].Value(now, cfg.RecentHalfLife)
				}
				idx, err := Choose(cfg, ss, 3, rng)
				if err != nil || len(idx) != 3 {
					t.Fatalf("Choose = %v, %v", idx, err)
				}
				for _, i := range idx {
					rec[i].Add(now, cfg.RecentHalfLife)
					got[i]++
				}
				now = now.Add(50 * time.Millisecond)
			}
			return got
		}
		first := burst(8)
		for i, n := range first {
			if n > 2 {
				t.Errorf("seed %d: first burst put %d replicas on %s", seed, n, ss[i].ID)
			}
		}
		now = now.Add(30 * time.Second)
		second := burst(16)
		for i := range ss {
			if second[i] != 3 {
				t.Errorf("seed %d: second burst put %d replicas on %s, want 3", seed, second[i], ss[i].ID)
			}
		}
	}
}

// TestConsecutiveChunksScatter places 96 three-replica chunks one after
// another on 8 servers, as a writer fills a cluster, counting creations as
// the master does. Every server must take its 36 replicas and share chunks
// with every other server: when one fails, all the others can be sources
// of its re-replication. (Ranked by the decayed counts alone, the chunks
// went round in a fixed rotation and each server shared chunks with four.)
func TestConsecutiveChunksScatter(t *testing.T) {
	cfg := DefaultConfig()
	for seed := range uint64(10) {
		ss := servers(8, 1)
		rec := make([]Recency, len(ss))
		peers := make([]map[int]bool, len(ss))
		for i := range peers {
			peers[i] = map[int]bool{}
		}
		held := make([]int, len(ss))
		rng := rand.New(rand.NewPCG(seed, 6))
		now := time.Unix(5000, 0)
		for range 96 {
			for i := range ss {
				ss[i].Recent = rec[i].Value(now, cfg.RecentHalfLife)
			}
			idx, err := Choose(cfg, ss, 3, rng)
			if err != nil || len(idx) != 3 {
				t.Fatalf("Choose = %v, %v", idx, err)
			}
			for _, a := range idx {
				rec[a].Add(now, cfg.RecentHalfLife)
				held[a]++
				for _, b := range idx {
					peers[a][b] = a != b
				}
			}
			now = now.Add(300 * time.Millisecond)
		}
		for i := range ss {
			n := 0
			for _, p := range peers[i] {
				if p {
					n++
				}
			}
			if held[i] != 36 || n != len(ss)-1 {
				t.Errorf("seed %d: %s holds %d replicas (want 36) sharing chunks with %d servers (want %d)", seed, ss[i].ID, held[i], n, len(ss)-1)
			}
		}
	}
}
