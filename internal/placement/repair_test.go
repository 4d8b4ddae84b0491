package placement

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestRepairOrder(t *testing.T) {
	rs := []Repair{
		{Handle: 1, Live: 2, Want: 3},
		{Handle: 2, Live: 1, Want: 3, Deleted: true},
		{Handle: 3, Live: 2, Want: 3, Blocked: true},
		{Handle: 4, Live: 1, Want: 3},
		{Handle: 5, Live: 1, Want: 2},
		{Handle: 6, Live: 2, Want: 5},
	}
	RepairOrder(rs)
	var got []uint64
	for _, r := range rs {
		got = append(got, r.Handle)
	}
	// One replica before two; blocked first among equals; deleted last
	// among equals; then the biggest shortfall; then by handle.
	if want := []uint64{4, 5, 2, 3, 6, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

func TestCloneTargetAvoidsHolderRacksFullAndBusy(t *testing.T) {
	ss := servers(6, 3) // cs00..cs05 on r0, r1, r2, r0, r1, r2
	rng := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		i := CloneTarget(DefaultConfig(), ss, []string{"r0", "r1"}, 2, rng)
		if ss[i].Rack != "r2" {
			t.Fatalf("target %s on %s, a holder's rack", ss[i].ID, ss[i].Rack)
		}
	}
	ss[2].Free, ss[5].Clones = 0, 2 // r2: one full, one at the clone limit
	if i := CloneTarget(DefaultConfig(), ss, []string{"r0", "r1"}, 2, rng); i < 0 || i == 2 || i == 5 {
		t.Errorf("target %d: full or busy", i)
	}
	for i := range ss {
		ss[i].Free = 0
	}
	if i := CloneTarget(DefaultConfig(), ss, nil, 2, rng); i != -1 {
		t.Errorf("target %d among full servers", i)
	}
}

func TestCloneTargetSpreadsClones(t *testing.T) {
	ss := servers(4, 1) // one rack
	ss[0].Clones, ss[1].Clones, ss[3].Clones = 1, 1, 1
	rng := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		if i := CloneTarget(DefaultConfig(), ss, []string{"r0"}, 2, rng); i != 2 {
			t.Fatalf("target %d, want the one with no clone in flight (2)", i)
		}
	}
	// Rack spread comes first: an idle server on a holder's rack loses to
	// a busier one elsewhere.
	ss = servers(4, 2) // r0, r1, r0, r1
	ss[1].Clones, ss[3].Clones = 1, 1
	if i := CloneTarget(DefaultConfig(), ss, []string{"r0"}, 2, rng); i != 1 && i != 3 {
		t.Errorf("target %d on a holder's rack", i)
	}
}

func TestCloneSource(t *testing.T) {
	hs := []Server{{ID: "a", Clones: 1}, {ID: "b", Load: 5}, {ID: "c", Load: 1}, {ID: "d", Clones: 2}}
	if i := CloneSource(hs, 2); i != 2 {
		t.Errorf("source %d, want the idle, least loaded one (2)", i)
	}
	if i := CloneSource(hs[3:], 2); i != -1 {
		t.Errorf("source %d at the limit", i)
	}
}

func TestTrimKeepsRackSpread(t *testing.T) {
	hs := []Server{
		{ID: "a", Rack: "r1", Capacity: 100, Used: 10},
		{ID: "b", Rack: "r1", Capacity: 100, Used: 50},
		{ID: "c", Rack: "r2", Capacity: 100, Used: 90},
		{ID: "d", Rack: "r3", Capacity: 100, Used: 10},
		{ID: "e", Rack: "r1", Capacity: 100, Used: 20},
	}
	// Two from r1 (three there), the fullest first; r2 and r3 keep theirs.
	if got := Trim(hs, 3); !reflect.DeepEqual(got, []int{1, 4}) {
		t.Errorf("trim %v, want [1 4]", got)
	}
	if got := Trim(hs, 5); len(got) != 0 {
		t.Errorf("trim %v with nothing in excess", got)
	}
}
