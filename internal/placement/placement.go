// Package placement is the pure policy that decides where new chunk
// replicas go. Given the live chunkservers, it picks R distinct ones,
// spreading a burst of creations over all servers (a new chunk brings a
// burst of writes: GFS limits the recent creations on each chunkserver),
// avoiding servers clearly above the average utilisation, and spreading
// replicas over racks. It does no I/O and reads no clock (times are
// passed in); any randomness comes from the *rand.Rand passed in, so a
// choice is reproducible from its inputs.
//
// Choose places a new chunk's replicas and ChainOrder orders them as the
// chain a push travels; RepairOrder, CloneSource, CloneTarget and Trim
// decide re-replication (which chunk first, from where, to where, and
// which excess replica goes); BalanceMoves and KeepsSpread decide the
// rebalancer's moves. The master's registry gathers the Server values
// and applies the answers.
package placement

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Server is what the policy knows of one live chunkserver.
type Server struct {
	ID       string
	Rack     string
	Capacity int64 // bytes
	Used     int64 // bytes of chunk data it holds
	// Free is the space (bytes) its disks report free. A server that
	// reports none is full: it gets no new replica, not even as primary.
	Free int64
	Load int // operations in flight
	// Clones counts the re-replications in flight it takes part in (as
	// source or target).
	Clones int
	// Recent counts the chunks created on it lately, each weighted by how
	// recent it is (see Recency): 1 for a chunk created just now, 0.5 for
	// one created a half-life ago.
	Recent float64
}

// Recency is a server's decaying count of recent creations. A creation
// counts 1 at once and halves every half-life, so the count follows the
// write streams new chunks bring (a new chunk predicts imminent writes)
// and, unlike a window that is reset now and then, never forgets half a
// burst: every creation of a burst placed within a second still counts
// almost fully when the next chunk of that burst is placed. The zero
// value counts nothing.
type Recency struct {
	value float64
	at    time.Time
}

// Value returns the count at now.
func (r *Recency) Value(now time.Time, halfLife time.Duration) float64 {
	if r.value == 0 || halfLife <= 0 {
		return r.value
	}
	age := now.Sub(r.at)
	if age <= 0 {
		return r.value
	}
	v := r.value * math.Exp2(-float64(age)/float64(halfLife))
	if v < 1e-9 {
		return 0
	}
	return v
}

// Add counts one creation at now.
func (r *Recency) Add(now time.Time, halfLife time.Duration) {
	r.value = r.Value(now, halfLife) + 1
	if now.After(r.at) {
		r.at = now
	}
}

// utilisation is the fraction of capacity in use; a server reporting no
// capacity counts as full.
func (s *Server) utilisation() float64 {
	if s.Capacity <= 0 {
		return 1
	}
	return float64(s.Used) / float64(s.Capacity)
}

// Config tunes the policy.
type Config struct {
	// MaxRecent caps a server's recent creations (its decaying count,
	// Server.Recent); servers at the cap are used only when nothing else
	// is left.
	MaxRecent int
	// RecentHalfLife is how fast a creation stops counting as recent
	// (Recency). It should be about the time a new chunk keeps its
	// replicas busy: long enough that a burst of creations spreads over
	// every server, short enough that an earlier burst whose writes are
	// over does not skew the next one (with a fixed window, a burst that
	// straddled a reset, or came after an uneven one, piled several
	// replicas on a few servers).
	RecentHalfLife time.Duration
	// MinFree is the reserve: a server needs more free space (bytes) than
	// this, both on its disks and within its capacity, to take a replica.
	MinFree int64
	// UtilisationBand is how far (a fraction of capacity) a server's
	// utilisation may exceed the average before it counts as above it.
	// Servers within the band are equals: slightly uneven usage must not
	// steer a whole burst of new chunks to the emptier half.
	UtilisationBand float64
}

// DefaultConfig returns the policy's defaults.
func DefaultConfig() Config {
	return Config{MaxRecent: 64, RecentHalfLife: 10 * time.Second, MinFree: 0, UtilisationBand: 0.05}
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	if c.MaxRecent < 1 {
		return errors.New("placement: MaxRecent must be at least 1")
	}
	if c.RecentHalfLife < 0 {
		return errors.New("placement: RecentHalfLife must not be negative")
	}
	if c.MinFree < 0 {
		return errors.New("placement: MinFree must not be negative")
	}
	if !(c.UtilisationBand >= 0 && c.UtilisationBand < 1) {
		return errors.New("placement: UtilisationBand must be in [0, 1)")
	}
	return nil
}

// ErrNoServers is returned when no server can take a replica.
var ErrNoServers = errors.New("placement: no chunkserver with free space")

// Choose returns the indexes in servers of up to r distinct servers for a
// new chunk, best first. It returns fewer than r when fewer servers can take
// one, and ErrNoServers when none can. rng breaks ties; nil means ties go by
// ID.
func Choose(cfg Config, servers []Server, r int, rng *rand.Rand) ([]int, error) {
	cand := candidates(cfg, servers)
	if len(cand) == 0 || r < 1 {
		return nil, ErrNoServers
	}
	rank(cfg, servers, cand, rng)
	return spread(servers, cand, r), nil
}

// hasRoom reports whether s can take a replica: free space above the
// reserve on its disks and within its capacity.
func hasRoom(cfg Config, s *Server) bool {
	return s.Capacity > 0 && min(s.Capacity-s.Used, s.Free) > cfg.MinFree
}

// candidates returns the servers with enough free space.
func candidates(cfg Config, servers []Server) []int {
	var out []int
	for i := range servers {
		if hasRoom(cfg, &servers[i]) {
			out = append(out, i)
		}
	}
	return out
}

// rank orders cand: servers under the recent-creation cap first, then fewer
// recent creations (so consecutive creations go round all servers; with
// an rng, counts within about half a creation are equal: recentClass), then
// those not above the average utilisation by more than the band, then lower
// load, then lower utilisation outside the band. Servers equal on all of
// these keep the rng's (or the IDs') order.
func rank(cfg Config, servers []Server, cand []int, rng *rand.Rand) {
	var sum float64
	for _, i := range cand {
		sum += servers[i].utilisation()
	}
	limit := sum/float64(len(cand)) + cfg.UtilisationBand
	slices.SortFunc(cand, func(a, b int) int { return cmp.Compare(servers[a].ID, servers[b].ID) })
	if rng != nil {
		rng.Shuffle(len(cand), func(i, j int) { cand[i], cand[j] = cand[j], cand[i] })
	}
	type key struct {
		capped, above bool
		recent        float64
		load          int
		excess        float64 // utilisation above the band's top, else 0
	}
	// Each key is computed once, not at every comparison: among 10,000
	// servers the sort compares 280,000 times.
	dense := make([]key, len(servers))
	shift := recentShift(rng)
	for _, i := range cand {
		s := &servers[i]
		u := s.utilisation()
		dense[i] = key{capped: s.Recent >= float64(cfg.MaxRecent), above: u > limit, recent: recentClass(s.Recent, shift), load: s.Load, excess: max(u-limit, 0)}
	}
	slices.SortStableFunc(cand, func(a, b int) int {
		ka, kb := &dense[a], &dense[b]
		return cmp.Or(cmpBool(ka.capped, kb.capped), cmp.Compare(ka.recent, kb.recent), cmpBool(ka.above, kb.above),
			cmp.Compare(ka.load, kb.load), cmp.Compare(ka.excess, kb.excess))
	})
}

// recentShift draws where rank's classes of recent creations start
// (recentClass); none when rng is nil.
func recentShift(rng *rand.Rand) float64 {
	if rng == nil {
		return -1
	}
	return rng.Float64()
}

// recentClass is what rank compares of a server's recent creations: the
// count itself when shift is negative (no rng), else its class of half a
// creation's width, the classes' bounds moved by shift (in [0, 1)).
// Servers of one class are equals, ordered by the keys after it and then
// by the rng, so a burst still goes round every server (one with a
// creation more is never ranked first) but not in the same order each
// round. Ranked by the decayed counts alone, the servers chosen longest
// ago always came first and consecutive chunks went to the same groups in
// rotation, tying each server's replicas to four peers of eight: when a
// server fails only those peers can be clone sources, and their NICs
// bound the re-replication.
func recentClass(recent, shift float64) float64 {
	if shift < 0 {
		return recent
	}
	return math.Floor(2*recent + shift)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// spread takes up to r servers from the ranked cand, one per rack first,
// then filling up from racks already used.
func spread(servers []Server, cand []int, r int) []int {
	out := make([]int, 0, r)
	racks := make(map[string]bool)
	taken := make(map[int]bool)
	for _, i := range cand {
		if len(out) < r && !racks[servers[i].Rack] {
			racks[servers[i].Rack] = true
			taken[i] = true
			out = append(out, i)
		}
	}
	for _, i := range cand {
		if len(out) < r && !taken[i] {
			out = append(out, i)
		}
	}
	return out
}
