package main

import (
	"errors"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/chunkserver"
)

func TestChunkserverThrottleFlags(t *testing.T) {
	o, err := chunkserverFlags([]string{"--dir", t.TempDir(), "--clone-streams", "3", "--clone-rate", "10M", "--clone-source-rate", "5M", "--urgent-yield-rate", "2M", "--stream-idle", "45s", "--reserve", "1G"})
	if err != nil {
		t.Fatal(err)
	}
	if c := o.cfg; c.CloneStreams != 3 || c.CloneRate != 10<<20 || c.CloneSourceRate != 5<<20 || c.UrgentYieldRate != 2<<20 || c.StreamIdle != 45*time.Second || c.Reserve != 1<<30 {
		t.Fatalf("parsed %d streams, rate %d, source rate %d, idle %v", c.CloneStreams, c.CloneRate, c.CloneSourceRate, c.StreamIdle)
	}
	o, err = chunkserverFlags([]string{"--dir", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if c := o.cfg; c.CloneStreams != chunkserver.DefaultCloneStreams || c.CloneRate != chunkserver.DefaultCloneRate || c.CloneSourceRate != chunkserver.DefaultCloneSourceRate || c.UrgentYieldRate != chunkserver.DefaultUrgentYieldRate || c.StreamIdle != 30*time.Second {
		t.Fatalf("defaults: %d streams, rate %d, idle %v", c.CloneStreams, c.CloneRate, c.StreamIdle)
	}
	for _, bad := range [][]string{
		{"--clone-streams", "0"},
		{"--clone-rate", "fast"},
		{"--clone-source-rate", "-1"},
		{"--urgent-yield-rate", "-1"},
		{"--stream-idle", "0s"},
		{"--reserve", "lots"},
	} {
		_, err := chunkserverFlags(append([]string{"--dir", t.TempDir()}, bad...))
		var u *usageError
		if !errors.As(err, &u) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}
