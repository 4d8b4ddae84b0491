package bench

import (
	"math"
	"testing"
)

// The paper's Figure 3 limits: 100 Mbps NICs, a 1 Gbps link, 16
// chunkservers, 3 replicas.
func TestLimitMatchesPaper(t *testing.T) {
	paper := Network{NIC: 100 * Mbit, Link: 1000 * Mbit, Chunkservers: 16, Replicas: 3}
	cases := []struct {
		w       Workload
		clients int
		want    float64
	}{
		{Reads, 1, 12.5},
		{Reads, 8, 100},
		{Reads, 16, 125},
		{Writes, 1, 12.5},
		{Writes, 4, 50},
		{Writes, 8, 200.0 / 3}, // "plateaus at 67 MB/s"
		{Writes, 16, 200.0 / 3},
		{Appends, 1, 12.5},
		{Appends, 16, 12.5},
	}
	for _, c := range cases {
		if got := paper.Limit(c.w, c.clients); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Limit(%s, %d) = %g, want %g", c.w, c.clients, got, c.want)
		}
	}
}

func TestLimitScales(t *testing.T) {
	full := Network{NIC: 100 * Mbit, Link: 1000 * Mbit, Chunkservers: 16, Replicas: 3}
	tenth := Network{NIC: 10 * Mbit, Link: 100 * Mbit, Chunkservers: 16, Replicas: 3}
	for _, w := range Workloads {
		for _, n := range []int{1, 2, 4, 8, 16} {
			if a, b := full.Limit(w, n), tenth.Limit(w, n)*10; math.Abs(a-b) > 1e-9 {
				t.Errorf("%s N=%d: full %g, tenth×10 %g", w, n, a, b)
			}
		}
	}
}

func TestParseWorkloads(t *testing.T) {
	got, err := ParseWorkloads("writes, reads")
	if err != nil || len(got) != 2 || got[0] != Writes || got[1] != Reads {
		t.Fatalf("ParseWorkloads = %v, %v", got, err)
	}
	if _, err := ParseWorkloads("reads,deletes"); err == nil {
		t.Fatal("ParseWorkloads accepted an unknown workload")
	}
}
