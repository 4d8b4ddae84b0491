package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/chunkfs/chunkfs/internal/bench"
)

// runBenchSmallfile is `chunkfs bench smallfile`: mdtest's phases (create
// and write, stat, read, remove) on small files through a chunkfs mount,
// by one worker process and by several, beside the same phases on a
// local directory. Without --mount it starts a cluster and a mount on
// loopback, which needs /dev/fuse.
func runBenchSmallfile(ctx context.Context, args []string) error {
	cfg, verbose, err := benchSmallFlags(args)
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
	rep, err := bench.RunSmallfile(ctx, cfg, log)
	if rep != nil && len(rep.Rows) > 0 {
		err = errors.Join(err, rep.WriteTable(os.Stdout))
	}
	return err
}

// benchSmallFlags parses the options of `chunkfs bench smallfile`.
func benchSmallFlags(args []string) (cfg bench.SmallConfig, verbose bool, err error) {
	cfg = bench.DefaultSmallConfig()
	fs := flag.NewFlagSet("bench smallfile", flag.ContinueOnError)
	fs.IntVar(&cfg.Files, "files", cfg.Files, "entries of the directory the phases run in (issue 18 also asks for 100000)")
	fs.IntVar(&cfg.Size, "size", cfg.Size, "bytes of each file")
	procs := fs.String("procs", "1,4", "worker processes of each run, comma-separated")
	fs.StringVar(&cfg.Mount, "mount", "", "run on this existing chunkfs mount instead of starting a cluster")
	fs.IntVar(&cfg.Chunkservers, "chunkservers", cfg.Chunkservers, "chunkservers of the cluster started")
	mountArgs := fs.String("mount-args", "", "extra flags of the mount started, space-separated (say \"--no-cache\")")
	fs.StringVar(&cfg.Local, "local", "", "directory of the local reference run (default: under --work-dir)")
	fs.BoolVar(&cfg.DropCaches, "drop-caches", false, "drop the kernel's caches before the stat and read phases (root only)")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve /debug/pprof from the master, the chunkservers and the mount started; their URLs are logged")
	fs.StringVar(&cfg.WorkDir, "work-dir", "", "where the servers keep their data (default: a temporary directory, removed after)")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound of the whole run")
	fs.BoolVar(&verbose, "v", false, "log each phase and the servers started")
	if err := parseBench(fs, args); err != nil {
		return cfg, false, err
	}
	if cfg.Procs, err = parseInts(*procs); err != nil {
		return cfg, false, benchUsage("--procs: %v", err)
	}
	cfg.MountArgs = strings.Fields(*mountArgs)
	return cfg, verbose, nil
}
