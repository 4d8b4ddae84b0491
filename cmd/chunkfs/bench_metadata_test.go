package main

import (
	"runtime"
	"strings"
	"testing"
)

// TestHeapProfileRate: --heap-profile-rate sets the runtime's sampling
// rate only with --heap-profile, and a rate that is not positive is
// refused with the rate left as it was.
func TestHeapProfileRate(t *testing.T) {
	was := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate = was })
	if _, _, err := metadataFlags([]string{"--heap-profile-rate", "1024"}); err != nil || runtime.MemProfileRate != was {
		t.Fatalf("no --heap-profile: err %v, rate %d, want nil and %d", err, runtime.MemProfileRate, was)
	}
	_, _, err := metadataFlags([]string{"--heap-profile", "h.pprof", "--heap-profile-rate", "0"})
	if err == nil || !strings.Contains(err.Error(), "--heap-profile-rate 0") || runtime.MemProfileRate != was {
		t.Fatalf("rate 0: err %v, rate %d, want an error naming the flag and %d", err, runtime.MemProfileRate, was)
	}
	if _, _, err := metadataFlags([]string{"--heap-profile", "h.pprof", "--heap-profile-rate", "2048"}); err != nil || runtime.MemProfileRate != 2048 {
		t.Fatalf("rate 2048: err %v, rate %d", err, runtime.MemProfileRate)
	}
}
