package master

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// TestHoldLoggedUncountsAndForgetsMoot: a master taking the held-back
// replicas the log holds (holdLogged) stops counting one it counted from a
// report while it followed, counts it at that version from no later
// report, and forgets the fact once the chunk's logged version passed it.
func TestHoldLoggedUncountsAndForgetsMoot(t *testing.T) {
	r := registryOf(3)
	now := time.Unix(2000, 0)
	for _, s := range r.sorted() {
		r.addReplica(s, 7, 4)
	}
	logged := chunkfs.Version(4)
	version := func(h chunkfs.Handle) (chunkfs.Version, bool) { return logged, h == 7 }
	c := r.servers["cs03"]
	r.holdLogged([]namespace.HeldBackChunk{{Handle: 7, Replicas: []namespace.HeldBack{{Server: "cs03", Version: 4}}}}, version, now)
	if got := len(r.replicas(7, 4)); got != 2 || !r.heldBack(c, 7, 4) || r.unlogged(7, 4) {
		t.Fatalf("after holdLogged: %d replicas counted, cs03 held back %v, unlogged %v", got, r.heldBack(c, 7, 4), r.unlogged(7, 4))
	}
	if r.servers["cs03"].queued(7) {
		t.Error("the held-back replica was condemned")
	}
	if _, err := r.register(fullReport{figures: figures{id: c.id, addr: c.addr, capacity: 1 << 40, free: 1 << 39}, chunks: []replica{{7, 4}}}, version, now); err != nil {
		t.Fatal(err)
	}
	if got := len(r.replicas(7, 4)); got != 2 {
		t.Fatalf("cs03's registration at version 4 counted it: %d replicas", got)
	}
	// A heartbeat that reaches it before it leads is learnt, as a
	// follower learns, and does not count it either.
	r.heartbeat(beat{figures: figures{id: c.id, addr: c.addr}, sample: []replica{{7, 4}}}, version, now, 10*time.Second, false)
	if got := len(r.replicas(7, 4)); got != 2 {
		t.Fatalf("cs03's sample at version 4, learnt, counted it: %d replicas", got)
	}
	logged = 5
	r.holdLogged(nil, version, now)
	if len(r.away) != 0 {
		t.Errorf("facts the log moved past are kept: %v", r.away)
	}
}

// TestMissedUnloggedUntilLogged: a grant's replica whose call failed is
// held back at the grant's version and unlogged (no chain at that version
// is handed out) until the log holds it; a fact failing to be logged
// fences the chunk, so its next writer gets a new version.
func TestMissedUnloggedUntilLogged(t *testing.T) {
	r := registryOf(3)
	now := time.Unix(2000, 0)
	order := r.sorted()
	for _, s := range order {
		r.addReplica(s, 7, 4)
	}
	r.beginCalls(7, 5)
	errs := []error{nil, nil, errors.New("lost answer")}
	r.recordTaken(7, 5, order, errs)
	ids := r.missed(7, 5, order, errs)
	r.forgetFailed(7, order, errs, now)
	r.endCalls(7)
	if !slices.Equal(ids, []string{"cs03"}) || !r.unlogged(7, 5) || r.unlogged(7, 6) {
		t.Fatalf("missed %v, unlogged at 5: %v, at 6: %v", ids, r.unlogged(7, 5), r.unlogged(7, 6))
	}
	r.recordLease(7, order[0], now.Add(time.Minute), now)
	r.fenceAway(7)
	if d := r.grantable(7, 5, now); d.verdict != leaseGrant || !d.fenced || len(d.replicas) != 2 {
		t.Fatalf("after a hold-back failed to be logged: %+v, want a fenced grant to two", d)
	}
	r.loggedAway("cs03", 7, 5)
	if r.unlogged(7, 5) || !r.heldBack(order[2], 7, 5) {
		t.Errorf("logged: unlogged %v, held back %v", r.unlogged(7, 5), r.heldBack(order[2], 7, 5))
	}
}
