package placement

import (
	"cmp"
	"slices"
)

// Hop is what ChainOrder knows of one replica of a new chunk.
type Hop struct {
	// Load is the server's operations in flight, as the master's lease
	// grant sees it (it names the least loaded replica primary).
	Load int
	// Forwards counts, decaying like Server.Recent (see Recency), the
	// chains lately ordered with this server somewhere but last, so that
	// it forwards their data to the next replica.
	Forwards float64
	// Chains counts, decaying alike, the new chunks placed on the server
	// before this one (Server.Recent before this choice).
	Chains float64
}

// ChainOrder returns the order (indexes into hops) in which clients should
// push a new chunk's data along its replicas. Every replica but the last
// forwards what it receives, so in a burst of new chunks a server that is
// never last sends out as much as it takes in, plus the ACKs of its own
// inbound stream, while one that is last somewhere has room to spare. With
// orders picked per client (or by a hash) a third of the servers of a
// burst forward every chain they are in; this order puts last the replica
// that forwarded most lately, so that over a burst each server is last in
// its share of chains (16 chunks of 3 replicas on 16 servers: each server
// forwards two of its three).
//
// The order is by load first, least loaded first, because the master's
// lease grant names the least loaded replica primary and lists the primary
// first: a chain sorted by load survives that unchanged. Among equal loads
// the hop most over its fair share of forwards goes last: of its earlier
// chains, a fair share is (n-1)/n forwarding for n hops; a server that
// forwarded in all of them must now be last, one that forwarded in one of
// one can wait. (Ranking by forwards alone left one server in ten bursts
// forwarding all its three chains: two hops that had forwarded twice met in
// a chain.) Hops equal in both keep their given order.
func ChainOrder(hops []Hop) []int {
	order := make([]int, len(hops))
	for i := range order {
		order[i] = i
	}
	fair := float64(len(hops)-1) / float64(max(len(hops), 1))
	excess := func(h Hop) float64 { return h.Forwards - fair*h.Chains }
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(hops[a].Load, hops[b].Load), cmp.Compare(excess(hops[a]), excess(hops[b])))
	})
	return order
}
