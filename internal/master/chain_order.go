package master

import (
	"time"

	"github.com/chunkfs/chunkfs/internal/placement"
)

// orderChain puts the servers chosen for a new chunk in the order its
// writers should push data along them (placement.ChainOrder: the replica
// that forwarded most lately goes last), and counts a forward for every
// server but the last. The lease grant keeps this order (it is sorted by
// load, as the grant sorts) and the master lists the replicas in it, primary
// first; clients keep it among replicas at the same distance
// (client/locations.go).
func (r *registry) orderChain(chosen []*server, now time.Time, halfLife time.Duration) {
	if len(chosen) < 2 {
		return
	}
	hops := make([]placement.Hop, len(chosen))
	for i, s := range chosen {
		// choose has counted this chunk in s.recent already.
		hops[i] = placement.Hop{Load: int(s.load), Forwards: s.forwards.Value(now, halfLife), Chains: max(s.recent.Value(now, halfLife)-1, 0)}
	}
	in := append([]*server(nil), chosen...)
	for i, j := range placement.ChainOrder(hops) {
		chosen[i] = in[j]
	}
	for _, s := range chosen[:len(chosen)-1] {
		s.forwards.Add(now, halfLife)
	}
}
