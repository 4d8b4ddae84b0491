package master

import (
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
)

// TestFollowerLearnsReplicasFromHeartbeats: a master that does not lead
// learns from a heartbeat's sample the replicas made after the server
// registered, at the version it has applied, and condemns nothing.
func TestFollowerLearnsReplicasFromHeartbeats(t *testing.T) {
	r := newRegistry(1)
	now := time.Unix(1_700_000_000, 0)
	log := map[chunkfs.Handle]chunkfs.Version{7: 2, 8: 1}
	version := func(h chunkfs.Handle) (chunkfs.Version, bool) { v, ok := log[h]; return v, ok }
	fig := figures{id: "cs1", addr: "cs1:7001", capacity: 1 << 30, free: 1 << 30}
	if _, err := r.register(fullReport{figures: fig}, version, now); err != nil {
		t.Fatal(err)
	}
	// 7 at the applied version, 8 behind it, 9 not applied yet.
	sample := []replica{{7, 2}, {8, 0}, {9, 1}}
	b := r.heartbeat(beat{figures: fig, sample: sample}, version, now.Add(time.Second), 10*time.Second, false)
	if b.reregister || len(b.garbage) > 0 || len(b.verify) > 0 {
		t.Fatalf("a follower's heartbeat answer %+v: want nothing", b)
	}
	if got := r.replicas(7, 2); len(got) != 1 || got[0].id != "cs1" {
		t.Errorf("replicas of chunk 7 at v2: %v, want cs1", got)
	}
	if got := r.replicas(8, 1); len(got) != 0 {
		t.Errorf("replicas of chunk 8 at v1: %v, want none (the server's is v0)", got)
	}
	// The log moves chunk 7 to v3 and the server's replica with it.
	log[7] = 3
	r.heartbeat(beat{figures: fig, sample: []replica{{7, 3}}}, version, now.Add(2*time.Second), 10*time.Second, false)
	if got := r.replicas(7, 3); len(got) != 1 {
		t.Errorf("replicas of chunk 7 at v3: %v, want cs1", got)
	}
}
