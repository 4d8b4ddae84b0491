package chunkserver

import (
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestRefusesAMasterOfAnotherCluster: a chunkserver keeps the cluster ID
// of the master it first registers with (across a restart) and names it
// in every report; a master of another cluster, which calls every chunk
// garbage, is refused and nothing is deleted.
func TestRefusesAMasterOfAnotherCluster(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.grant(1, 1)
	if err := tc.write(1, 1, 0, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	reregister := func() {
		t.Helper()
		tc.master.mu.Lock()
		tc.master.reregister = true
		tc.master.mu.Unlock()
		for range 50 {
			tc.clock.Advance(3 * time.Second)
			select {
			case e := <-tc.master.events:
				if e == "register" {
					time.Sleep(50 * time.Millisecond) // the server acts on the answer
					return
				}
			case <-time.After(100 * time.Millisecond):
			}
		}
		t.Fatal("no registration")
	}
	tc.master.mu.Lock()
	tc.master.cluster = "CID-A"
	tc.master.mu.Unlock()
	reregister()
	if got := tc.servers[0].clusterID(); got != "CID-A" {
		t.Fatalf("joined %q, want CID-A", got)
	}
	tc.master.mu.Lock()
	tc.master.cluster, tc.master.regGarbage = "CID-B", []uint64{1}
	tc.master.mu.Unlock()
	reregister()
	if _, err := tc.servers[0].store.Info(1); err != nil {
		t.Fatalf("the chunk after another cluster's master called it garbage: %v", err)
	}
	if got := tc.servers[0].clusterID(); got != "CID-A" {
		t.Fatalf("the server now belongs to %q", got)
	}
	tc.servers[0].Close()
	tc.start(0)
	var req *pb.RegisterRequest
	for deadline := time.Now().Add(10 * time.Second); req == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		tc.master.mu.Lock()
		req = tc.master.registered[tc.addrs[0]]
		tc.master.mu.Unlock()
	}
	if req == nil || req.ClusterId != "CID-A" {
		t.Fatalf("after a restart the registration: %+v", req)
	}
	if _, err := tc.servers[0].store.Info(1); err != nil {
		t.Fatalf("the chunk after the restart: %v", err)
	}
}
