package main

import (
	"testing"
	"time"
)

func TestBenchRecoveryFlags(t *testing.T) {
	cfg, out, _, err := benchRecoveryFlags([]string{"--quick", "--servers", "9", "--readers", "0", "--clone-rate", "0", "--one", "--lease", "5s"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Testbed.Chunkservers != 9 || cfg.Readers != 0 || cfg.Writers != 1 || cfg.CloneRate != 0 || cfg.Second || cfg.Lease != 5*time.Second || out != "bench-out" {
		t.Errorf("parsed %+v, out %q", cfg, out)
	}
	if cfg.Testbed.Prefix != "rec-" {
		t.Errorf("prefix %q, want rec-", cfg.Testbed.Prefix)
	}
	cfg, _, _, err = benchRecoveryFlags([]string{"--scale", "0.2"})
	if err != nil || cfg.CloneRate != 1_250_000 || cfg.CloneSourceRate != 1_250_000 || cfg.Testbed.Chunkservers != 8 {
		t.Errorf("--scale 0.2: clone rates %d, %d, %d servers, %v; want half a 20 Mbit/s NIC each, 8", cfg.CloneRate, cfg.CloneSourceRate, cfg.Testbed.Chunkservers, err)
	}
	cfg, _, _, err = benchRecoveryFlags([]string{"--clone-source-rate", "100000"})
	if err != nil || cfg.CloneSourceRate != 100_000 || cfg.CloneRate != 625_000 {
		t.Errorf("--clone-source-rate 100000: %d (clone rate %d), %v", cfg.CloneSourceRate, cfg.CloneRate, err)
	}
	for _, bad := range [][]string{{"--scale", "0"}, {"--bogus"}, {"extra"}} {
		if _, _, _, err := benchRecoveryFlags(bad); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

func TestMasterCloneMinRate(t *testing.T) {
	cfg, _, err := masterFlags([]string{"--dir", t.TempDir(), "--clone-min-rate", "256K"})
	if err != nil || cfg.MinCloneRate != 256<<10 {
		t.Errorf("--clone-min-rate 256K: %d, %v", cfg.MinCloneRate, err)
	}
	if _, _, err := masterFlags([]string{"--dir", t.TempDir(), "--clone-min-rate", "0"}); err == nil {
		t.Error("--clone-min-rate 0 accepted")
	}
}
