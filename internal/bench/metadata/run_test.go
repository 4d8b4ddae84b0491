package metadata

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestMetadataSmall runs bench metadata at 0.2 % of Cluster B: Table 2's
// counts, dead files in the trash included, must match what was built
// (Run checks), the checkpoint must hold them, and both restarts must bring every chunk's locations
// back from the fleet's reports. Speed is not asserted.
func TestMetadataSmall(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Scale, cfg.Dir, cfg.Clients, cfg.NoSync, cfg.FleetServers = 0.002, t.TempDir(), 4, true, 20
	cfg.Heartbeat, cfg.HeartbeatWindow, cfg.FleetWorkload, cfg.Lease = 200*time.Millisecond, time.Second, time.Second, 2*time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.Text())
	if rep.Files != 1474 || rep.DeadFiles != 464 || rep.Chunks+rep.DeadChunks != 3100 || rep.Servers != 3 {
		t.Errorf("built %d files, %d dead, %d chunks on %d servers; want 1474, 464, 3100, 3", rep.Files, rep.DeadFiles, rep.Chunks+rep.DeadChunks, rep.Servers)
	}
	if rep.Table2.DeadFiles != 464 || abs(rep.DeadChunks*rep.Files-rep.Chunks*rep.DeadFiles) > rep.Files {
		t.Errorf("Table 2: %d dead files; %d of %d chunks dead: want 464, as many a file as live", rep.Table2.DeadFiles, rep.DeadChunks, rep.Chunks+rep.DeadChunks)
	}
	if rep.Table2.DeadChunkservers != 0 || rep.Table2.UsedBytes != 3*rep.stored() {
		t.Errorf("Table 2: %d dead chunkservers, %d bytes used; want 0 and %d", rep.Table2.DeadChunkservers, rep.Table2.UsedBytes, 3*rep.stored())
	}
	if len(rep.Rates) != 2*len(rateOps) {
		t.Errorf("%d rates, want %d", len(rep.Rates), 2*len(rateOps))
	}
	if rep.HeapNamespace <= 0 || rep.RestartService <= 0 || rep.CheckpointBytes <= 0 {
		t.Errorf("namespace heap %d, restart %s, checkpoint %d bytes: want all positive", rep.HeapNamespace, rep.RestartService, rep.CheckpointBytes)
	}
	f := rep.Fleet
	if f == nil || f.Servers != 20 || f.Beats == 0 || f.Latency["all"].N == 0 || f.PausedAll.N == 0 {
		t.Fatalf("fleet run: %+v", f)
	}
}

func abs(n int) int { return max(n, -n) }
