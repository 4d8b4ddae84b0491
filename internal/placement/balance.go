package placement

import (
	"cmp"
	"slices"
)

// maxBalanceSide bounds the sources and the targets BalanceMoves pairs
// (the most extreme of each), so a round costs the same on any cluster.
const maxBalanceSide = 16

// Move is one pair the rebalancer may move a replica between: from the
// server at index From to the one at index To.
type Move struct{ From, To int }

// Utilisation returns the servers' overall utilisation (bytes used over
// bytes of capacity, both summed) and the spread: the highest minus the
// lowest server utilisation. Servers reporting no capacity are left out.
func Utilisation(servers []Server) (mean, spread float64) {
	var used, capacity int64
	lo, hi := 1.0, 0.0
	for i := range servers {
		s := &servers[i]
		if s.Capacity <= 0 {
			continue
		}
		used, capacity = used+s.Used, capacity+s.Capacity
		lo, hi = min(lo, s.utilisation()), max(hi, s.utilisation())
	}
	if capacity == 0 {
		return 0, 0
	}
	return float64(used) / float64(capacity), max(hi-lo, 0)
}

// BalanceMoves returns the pairs of servers a replica may move between to
// even out utilisation, best first, as HDFS's balancer pairs them: from a
// server above the mean by more than threshold (a fraction of capacity) to
// one below the mean, or from one above the mean to one below it by more
// than threshold. The fullest sources and the emptiest targets come first.
// A source needs fewer than maxClones clones in flight, a target that too
// and room for a replica (hasRoom). Nothing is returned when every server
// is within threshold of the mean: the cluster is balanced.
func BalanceMoves(cfg Config, servers []Server, threshold float64, maxClones int) []Move {
	mean, _ := Utilisation(servers)
	var from, to []int
	for i := range servers {
		s := &servers[i]
		switch u := s.utilisation(); {
		case s.Capacity <= 0 || s.Clones >= maxClones:
		case u > mean:
			from = append(from, i)
		case u < mean && hasRoom(cfg, s):
			to = append(to, i)
		}
	}
	byUse := func(desc bool) func(a, b int) int {
		return func(a, b int) int {
			c := cmp.Compare(servers[a].utilisation(), servers[b].utilisation())
			if desc {
				c = -c
			}
			return cmp.Or(c, cmp.Compare(servers[a].ID, servers[b].ID))
		}
	}
	slices.SortFunc(from, byUse(true))
	slices.SortFunc(to, byUse(false))
	from, to = from[:min(len(from), maxBalanceSide)], to[:min(len(to), maxBalanceSide)]
	var out []Move
	for _, f := range from {
		for _, t := range to {
			if servers[f].utilisation() > mean+threshold || servers[t].utilisation() < mean-threshold {
				out = append(out, Move{From: f, To: t})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Move) int {
		// The widest gap first.
		ga := servers[a.From].utilisation() - servers[a.To].utilisation()
		gb := servers[b.From].utilisation() - servers[b.To].utilisation()
		return cmp.Compare(gb, ga)
	})
	return out
}

// KeepsSpread reports whether moving a replica from a server on rack from
// to one on rack to leaves a chunk whose replicas are on racks (from among
// them) on at least as many distinct racks as before.
func KeepsSpread(racks []string, from, to string) bool {
	before := distinct(racks)
	after := make([]string, 0, len(racks))
	dropped := false
	for _, r := range racks {
		if r == from && !dropped {
			dropped = true
			continue
		}
		after = append(after, r)
	}
	return distinct(append(after, to)) >= before
}

func distinct(racks []string) int {
	seen := make(map[string]bool, len(racks))
	for _, r := range racks {
		seen[r] = true
	}
	return len(seen)
}
