package bench

import "testing"

// TestFreeAddrNeverRepeats: the servers of one cluster get distinct
// ports, though a port checked and closed is free again at once.
func TestFreeAddrNeverRepeats(t *testing.T) {
	lc := &localCluster{taken: map[string]bool{}}
	seen := map[string]bool{}
	for range 50 {
		a, err := lc.freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
}
