package placement

import (
	"cmp"
	"math/rand/v2"
	"slices"
)

// Repair is what RepairOrder knows of one under-replicated chunk.
type Repair struct {
	Handle  uint64
	Live    int  // live replicas at the current version
	Want    int  // the file's replication
	Blocked bool // a writer is waiting for it
	Deleted bool // its file is deleted but not yet collected
}

// RepairOrder sorts under-replicated chunks into the order they are
// cloned: fewest live replicas first (every chunk with one replica before
// any with two, as a second failure loses the former), then a chunk a
// writer is blocked on, then live files before deleted ones, then the
// biggest shortfall, then by handle so that the order is reproducible.
func RepairOrder(rs []Repair) {
	slices.SortStableFunc(rs, func(a, b Repair) int {
		return cmp.Or(cmp.Compare(a.Live, b.Live), cmpBool(!a.Blocked, !b.Blocked), cmpBool(a.Deleted, b.Deleted),
			cmp.Compare(b.Want-b.Live, a.Want-a.Live), cmp.Compare(a.Handle, b.Handle))
	})
}

// CloneTarget returns the index in servers of the best target for a new
// replica of a chunk whose holders are on holderRacks: a server with room
// and fewer than maxClones clones in flight, on a rack no holder is on if
// one can be, then the one with the fewest clones in flight (a target's
// clone bandwidth is its own, so clones spread over idle targets finish
// sooner than clones queued on the best-ranked one), then ranked as
// Choose ranks. It returns -1 when none can take it.
func CloneTarget(cfg Config, servers []Server, holderRacks []string, maxClones int, rng *rand.Rand) int {
	var cand []int
	for _, i := range candidates(cfg, servers) {
		if servers[i].Clones < maxClones {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 {
		return -1
	}
	rank(cfg, servers, cand, rng)
	offRack := func(i int) bool { return !slices.Contains(holderRacks, servers[i].Rack) }
	best := cand[0]
	for _, i := range cand[1:] { // in rank order: a later one must be strictly better
		if cmp.Or(cmpBool(!offRack(i), !offRack(best)), cmp.Compare(servers[i].Clones, servers[best].Clones)) < 0 {
			best = i
		}
	}
	return best
}

// CloneSource returns the index in holders of the replica to copy from:
// the one with fewest clones in flight under maxClones, then the least
// loaded; -1 when every holder is at the limit.
func CloneSource(holders []Server, maxClones int) int {
	best := -1
	for i, s := range holders {
		if s.Clones >= maxClones {
			continue
		}
		if best < 0 || cmp.Or(cmp.Compare(s.Clones, holders[best].Clones), cmp.Compare(s.Load, holders[best].Load)) < 0 {
			best = i
		}
	}
	return best
}

// Trim returns the indexes in holders of excess replicas to remove so that
// keep remain, keeping the best rack spread: it removes from the rack with
// most replicas first, and within it the fullest server.
func Trim(holders []Server, keep int) []int {
	left := make([]int, len(holders))
	for i := range left {
		left[i] = i
	}
	var out []int
	for len(left) > keep && keep >= 0 {
		perRack := make(map[string]int)
		for _, i := range left {
			perRack[holders[i].Rack]++
		}
		worst := slices.MaxFunc(left, func(a, b int) int {
			sa, sb := &holders[a], &holders[b]
			return cmp.Or(cmp.Compare(perRack[sa.Rack], perRack[sb.Rack]), cmp.Compare(sa.utilisation(), sb.utilisation()), cmp.Compare(sb.ID, sa.ID))
		})
		out = append(out, worst)
		left = slices.DeleteFunc(left, func(i int) bool { return i == worst })
	}
	slices.Sort(out)
	return out
}
