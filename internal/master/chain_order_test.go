package master

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/placement"
)

// registryOf returns a registry with n live, empty chunkservers.
func registryOf(n int) *registry {
	r := newRegistry(uint64(time.Unix(1000, 0).UnixNano()))
	for i := range n {
		s := &server{id: fmt.Sprintf("cs%02d", i+1), addr: fmt.Sprintf("10.0.1.%d:7001", i+1), capacity: 1 << 40, free: 1 << 40,
			alive: true}
		r.servers[s.id], r.byAddr[s.addr] = s, s
	}
	return r
}

// TestBurstChainsBalanced: bursts of 16 three-replica chunks on 16 servers
// (the GFS write benchmark at N = 16). With an order per client or per
// chunk hash, a server forwards each of its three chains with probability
// 2/3, so about 30% of the servers forward all three; the master's order
// makes each server last somewhere nearly always. The order is chosen as
// chunks are placed, without knowing the later ones, so now and then two
// servers that have forwarded every chain so far meet in the last chunk of
// a burst: about 9% of the servers then forward three (4% when the
// placement took the servers in a fixed rotation, which tied every
// server's replicas to four peers: placement.recentClass).
func TestBurstChainsBalanced(t *testing.T) {
	const bursts = 200
	three := 0
	for seed := range bursts {
		r := registryOf(16)
		r.rng = rand.New(rand.NewPCG(uint64(seed), 7))
		cfg := placement.DefaultConfig()
		now := time.Unix(1000, 0)
		forwards := map[*server]int{}
		for i := range 16 {
			chain, err := r.choose(cfg, 3, now.Add(time.Duration(i)*time.Millisecond), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range chain[:2] {
				forwards[s]++
			}
		}
		for _, n := range forwards {
			if n > 2 {
				three++
			}
		}
	}
	if frac := float64(three) / (bursts * 16); frac > 0.11 {
		t.Fatalf("%.1f%% of the servers forward all three of their chains, want under 11%% (30%% with random orders)", 100*frac)
	}
}

// TestChainSortedByLoad: the chain is sorted by load, as the lease grant
// sorts the replicas (primary first), so the order the master lists is the
// chain; among equal loads the server that forwarded most lately is last.
func TestChainSortedByLoad(t *testing.T) {
	r := registryOf(3)
	now := time.Unix(1000, 0)
	hl := 10 * time.Second
	a, b, c := r.servers["cs01"], r.servers["cs02"], r.servers["cs03"]
	a.load, b.load, c.load = 5, 0, 2
	chain := []*server{a, b, c}
	r.orderChain(chain, now, hl)
	if !slices.Equal(chain, []*server{b, c, a}) {
		t.Fatalf("chain %v %v %v, want by load", chain[0].id, chain[1].id, chain[2].id)
	}
	a.load, b.load, c.load = 0, 0, 0 // b and c forwarded once above, a not
	r.orderChain(chain, now, hl)
	if chain[0] != a || chain[2] == a {
		t.Fatalf("chain %v %v %v: want cs01, which forwarded least, first", chain[0].id, chain[1].id, chain[2].id)
	}
	one := []*server{a}
	r.orderChain(one, now, hl) // a single replica forwards nothing
	if v := a.forwards.Value(now, hl); v != 1 {
		t.Fatalf("cs01 forwards %v, want 1", v)
	}
}
