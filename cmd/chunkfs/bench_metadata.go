package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/chunkfs/chunkfs/internal/bench/metadata"
)

// runBenchMetadata is `chunkfs bench metadata`: GFS Cluster B's namespace
// built on a master in this process with simulated chunkservers, Table 2,
// operation rates beside HDFS's, heap, checkpoint, restart and a fleet of
// thousands of heartbeating servers. It needs no root.
func runBenchMetadata(ctx context.Context, args []string) error {
	cfg, out, err := metadataFlags(args)
	if err != nil {
		return err
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "chunkfs-bench-metadata-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	if err := cfg.Validate(); err != nil {
		return benchUsage("%v", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := metadata.Run(ctx, cfg)
	if rep != nil {
		err = errors.Join(err, metadataOutput(rep, out))
	}
	return err
}

// metadataOutput prints the report and writes it, with its JSON, to out.
func metadataOutput(rep *metadata.Report, out string) error {
	text := rep.Text()
	return writeBenchFiles(out, "metadata", "txt", text, rep)
}

// metadataFlags parses the options of `chunkfs bench metadata`.
func metadataFlags(args []string) (cfg metadata.Config, out string, err error) {
	fs := flag.NewFlagSet("bench metadata", flag.ContinueOnError)
	cfg = metadata.DefaultConfig()
	fs.Float64Var(&cfg.Scale, "scale", cfg.Scale, "fraction of Cluster B's files, chunks and chunkservers to build (0.01: a small form)")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "client goroutines of the operation rates and the fleet workload")
	fs.IntVar(&cfg.Ops, "ops", cfg.Ops, "operations of each kind timed, at scale 1")
	fs.IntVar(&cfg.FleetServers, "fleet", cfg.FleetServers, "simulated chunkservers of the fleet run, holding Cluster B's replicas (not scaled)")
	fs.IntVar(&cfg.ServersPerConn, "servers-per-conn", cfg.ServersPerConn, "fleet servers sharing one connection to the master (a process has a limited number of file descriptors)")
	fs.DurationVar(&cfg.FleetWorkload, "workload", cfg.FleetWorkload, "length of the fleet run's metadata workload")
	fs.DurationVar(&cfg.HeartbeatWindow, "heartbeat-window", cfg.HeartbeatWindow, "how long heartbeats alone are measured")
	fs.DurationVar(&cfg.Heartbeat, "heartbeat", cfg.Heartbeat, "the chunkservers' heartbeat interval")
	fs.BoolVar(&cfg.NoSync, "no-sync", false, "skip fsync of the master's log")
	fs.StringVar(&cfg.HeapProfile, "heap-profile", "", "write a heap profile (pprof) of the master at rest, the build's leases ended, to this file")
	profileRate := fs.Int("heap-profile-rate", 4096, "with --heap-profile: sample an allocation every this many bytes (runtime.MemProfileRate; Go's default 524288 misses most of a small master's structures)")
	fs.StringVar(&cfg.ProfileDir, "profile", "", "write CPU, mutex and block profiles (pprof) of the fleet run's workload to this directory")
	fs.StringVar(&cfg.Dir, "work-dir", "", "directory for the masters' data (default: a temporary directory, removed after)")
	fs.StringVar(&out, "out", "bench-out", "directory for metadata.txt and metadata.json")
	verbose := fs.Bool("v", false, "log the master's and the fleet's informational messages")
	if err := parseBench(fs, args); err != nil {
		return cfg, "", err
	}
	if cfg.HeapProfile != "" {
		if *profileRate <= 0 {
			return cfg, "", fmt.Errorf("--heap-profile-rate %d: want a positive number of bytes", *profileRate)
		}
		runtime.MemProfileRate = *profileRate
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	cfg.Progress = func(s string) { fmt.Fprintln(os.Stderr, s) }
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return cfg, out, nil
}
