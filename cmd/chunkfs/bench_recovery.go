package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/chunkfs/chunkfs/internal/bench"
)

// runBenchRecovery is `chunkfs bench recovery`: kill one chunkserver of a
// full cluster on the bench gfs testbed and time the re-replication, then
// two more and time the healing of the one-replica chunks, with readers and
// writers running throughout. It needs root.
func runBenchRecovery(ctx context.Context, args []string) error {
	cfg, out, verbose, err := benchRecoveryFlags(args)
	if err != nil {
		return err
	}
	exe, log, err := benchSetup(verbose)
	if err != nil {
		return err
	}
	cfg.Binary, cfg.WorkerArgv = exe, []string{exe, "bench-worker"}
	if err := cfg.Validate(); err != nil {
		return benchUsage("%v", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.RunRecovery(ctx, cfg, log)
	if rep != nil && len(rep.Phases) > 0 {
		if terr := rep.WriteTable(os.Stdout); terr != nil {
			err = errors.Join(err, terr)
		}
		paths, serr := rep.SaveFiles(out, cfg.Events)
		for _, p := range paths {
			fmt.Fprintf(os.Stdout, "wrote %s\n", p)
		}
		err = errors.Join(err, serr)
	}
	return err
}

// benchRecoveryFlags parses the options of `chunkfs bench recovery`.
func benchRecoveryFlags(args []string) (cfg bench.RecoveryConfig, out string, verbose bool, err error) {
	def := bench.DefaultRecoveryConfig()
	fs := flag.NewFlagSet("bench recovery", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "a run of a few minutes: 7 chunkservers, 96 MiB, one reader and one writer")
	scale := fs.Float64("scale", 0.1, "network rates relative to the paper's (100 Mbit/s NICs); the clone rate follows as half a NIC unless --clone-rate is given")
	servers := fs.Int("servers", 0, "chunkservers (default 8; --quick: 7)")
	fill := fs.Int64("fill", 0, "bytes written before the failures (default 384 MiB; --quick: 96 MiB)")
	fileSize := fs.Int64("file-size", 0, "bytes of each file written (default 32 MiB; --quick: 16 MiB)")
	chunkSize := fs.Int64("chunk-size", def.ChunkSize, "chunk size in bytes")
	readers := fs.Int("readers", -1, "clients reading during the run (default 2; --quick: 1)")
	writers := fs.Int("writers", -1, "clients writing during the run (default 1)")
	baseline := fs.Duration("baseline", 0, "how long the clients run before the first kill (default 30s; --quick: 10s)")
	cloneRate := fs.Int64("clone-rate", -1, "each chunkserver's clone throttle in bytes a second (default half a NIC; 0: unlimited)")
	sourceRate := fs.Int64("clone-source-rate", -1, "each chunkserver's throttle of the clones it sources, in bytes a second (default half a NIC; 0: unlimited)")
	streams := fs.Int("clone-streams", def.CloneStreams, "clones each chunkserver runs at once as a target")
	maxClones := fs.Int("max-clones", def.MaxClones, "the master's clones in flight per chunkserver as source, and apart as target")
	deadAfter := fs.Duration("dead-after", def.DeadAfter, "the master's silence before a chunkserver is dead")
	heartbeat := fs.Duration("heartbeat", def.Heartbeat, "the chunkservers' heartbeat interval")
	lease := fs.Duration("lease", def.Lease, "the master's lease duration; the first kill waits for the fill's leases to end")
	one := fs.Bool("one", false, "kill one chunkserver only, not two more after")
	prefix := fs.String("prefix", def.Testbed.Prefix, "start of the testbed's namespace names")
	workDir := fs.String("work-dir", "", "where the servers keep their data and logs (default: the system temp dir)")
	fs.StringVar(&out, "out", "bench-out", "directory for recovery.txt, recovery.png and recovery.svg")
	events := fs.Bool("json", false, "also write recovery.json: the whole report, every sample included")
	fs.BoolVar(&verbose, "v", false, "log every command the testbed runs")
	if err := parseBench(fs, args); err != nil {
		return cfg, "", false, err
	}
	cfg = def
	if *quick {
		cfg = bench.QuickRecoveryConfig()
	}
	cfg.Events = *events
	if *scale <= 0 || *scale > 10 {
		return cfg, "", false, benchUsage("--scale %g out of range (0, 10]", *scale)
	}
	cfg.WithScale(*scale)
	setIf(&cfg.Testbed.Chunkservers, *servers)
	setIf(&cfg.FillBytes, *fill)
	setIf(&cfg.FileBytes, *fileSize)
	setIf(&cfg.Baseline, *baseline)
	if *readers >= 0 {
		cfg.Readers = *readers
	}
	if *writers >= 0 {
		cfg.Writers = *writers
	}
	if *cloneRate >= 0 {
		cfg.CloneRate = *cloneRate
	}
	if *sourceRate >= 0 {
		cfg.CloneSourceRate = *sourceRate
	}
	cfg.Testbed.Clients = max(cfg.Testbed.Clients, cfg.Readers+cfg.Writers+1)
	cfg.ChunkSize, cfg.CloneStreams, cfg.MaxClones, cfg.DeadAfter, cfg.Heartbeat = *chunkSize, *streams, *maxClones, *deadAfter, *heartbeat
	cfg.Second, cfg.Testbed.Prefix, cfg.WorkDir, cfg.Lease = !*one, *prefix, *workDir, *lease
	return cfg, out, verbose, nil
}
