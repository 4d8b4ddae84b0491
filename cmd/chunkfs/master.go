package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/chunkfs/chunkfs/internal/master"
)

const masterExample = `  chunkfs master --dir /var/lib/chunkfs/master --listen 127.0.0.1:7070`

// runMaster runs `chunkfs master`: it serves the master on --listen with its
// state in --dir until ctx ends (SIGINT or SIGTERM), then stops gracefully.
func runMaster(ctx context.Context, args []string) error {
	cfg, listen, err := masterFlags(args)
	if err != nil {
		return err
	}
	m, err := master.Open(cfg)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		m.Close()
		return fmt.Errorf("listen on %s: %v", listen, err)
	}
	served := make(chan error, 1)
	go func() { served <- m.Serve(lis) }()
	select {
	case <-ctx.Done():
		cfg.Logger.Info("stopping master")
		err = m.Close()
		<-served
		return err
	case err = <-served:
		m.Close()
		return err
	}
}

// masterFlags parses the command line of `chunkfs master`.
func masterFlags(args []string) (master.Config, string, error) {
	cfg := master.DefaultConfig()
	fs := flag.NewFlagSet("master", flag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	dir := fs.String("dir", "", "data directory: lock file, operation log and checkpoints (required)")
	listen := fs.String("listen", "127.0.0.1:7070", "`HOST:PORT` to serve clients and chunkservers on")
	chunkSize := fs.Int64("chunk-size", cfg.ChunkSize, "chunk size in bytes for a new file system (fixed once made)")
	repl := fs.Int("replication", cfg.DefaultReplication, "default replicas per chunk for a new file system")
	lease := fs.Duration("lease", cfg.LeaseDuration, "chunk lease duration")
	deadAfter := fs.Duration("dead-after", cfg.DeadAfter, "declare a chunkserver dead after this long without a heartbeat")
	minRepl := fs.Int("min-replicas", cfg.MinReplicas, "fewest replicas a write is acknowledged with when fewer than a file's replication can take it")
	reserve := fs.Int64("reserve", cfg.Placement.MinFree, "free bytes a chunkserver keeps: one with less gets no new replica")
	safeThreshold := fs.Float64("safe-mode-threshold", cfg.SafeModeThreshold, "fraction of chunks with data that must be located before leaving safe mode after a start")
	safeServers := fs.Int("safe-mode-servers", cfg.SafeModeMinServers, "live chunkservers safe mode waits for (0: --min-replicas)")
	maxClones := fs.Int("max-clones", cfg.MaxClonesPerServer, "re-replications in flight per chunkserver, as source or target")
	verbose := fs.Bool("v", false, "log informational messages")
	fs.Usage = func() {
		fmt.Fprintf(&out, "Usage: chunkfs master --dir DIR --listen HOST:PORT [--chunk-size N] [--replication N]\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(&out, "\nExample:\n%s\n", masterExample)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(os.Stdout, out.String())
			return cfg, "", err
		}
		return cfg, "", usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return cfg, "", usagef("unexpected argument %q", fs.Arg(0))
	}
	if *dir == "" {
		return cfg, "", usagef("--dir is required")
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	cfg.Dir, cfg.ChunkSize, cfg.DefaultReplication, cfg.LeaseDuration, cfg.DeadAfter = *dir, *chunkSize, *repl, *lease, *deadAfter
	cfg.MinReplicas, cfg.Placement.MinFree, cfg.MaxClonesPerServer = *minRepl, *reserve, *maxClones
	cfg.SafeModeThreshold, cfg.SafeModeMinServers = *safeThreshold, *safeServers
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := cfg.Validate(); err != nil {
		return cfg, "", usagef("%v", err)
	}
	return cfg, *listen, nil
}
