package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/chunkfs/chunkfs/internal/bench"
)

// runBenchObservers is `chunkfs bench observers`: the HDFS-12943
// experiment (reads offloaded to observers free the leader for writes) on
// masters in network namespaces, each capped to a share of a CPU. It needs
// root.
func runBenchObservers(ctx context.Context, args []string) error {
	cfg, out, verbose, err := observersFlags(args)
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
	rep, err := bench.RunObservers(ctx, cfg, log)
	if rep != nil && len(rep.Columns) > 0 {
		err = errors.Join(err, observersOutput(rep, out))
	}
	return err
}

// observersOutput prints the table and the verdict and writes them, with
// the JSON report, to out.
func observersOutput(rep *bench.ObserversReport, out string) error {
	text := fmt.Sprintf("mix: %s; %d clients; masters: %d voters + %d observers at %g CPU each; %s a column; %d CPUs, load average at start %s\n\n%s\n%s",
		rep.Config.Mix, rep.Config.Clients, rep.Config.Voters, rep.Config.Observers, rep.Config.MasterCPU,
		rep.Config.Duration, rep.CPUs, rep.LoadAvg, rep.Table(), rep.Verdict())
	return writeBenchFiles(out, "observers", "md", text, rep)
}

// observersFlags parses the options of `chunkfs bench observers`.
func observersFlags(args []string) (cfg bench.ObserversConfig, out string, verbose bool, err error) {
	fs := flag.NewFlagSet("bench observers", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "a smoke run: 3 s a column at 200 ops/s")
	def := bench.DefaultObserversConfig()
	rate := fs.Float64("rate", 0, fmt.Sprintf("operations a second of the mixed workload, all clients (default %g; --quick %g)", def.Rate, bench.QuickObserversConfig().Rate))
	dur := fs.Duration("duration", 0, fmt.Sprintf("each column's run (default %v)", def.Duration))
	mix := fs.String("mix", def.Mix.String(), "the workload: op=weight,... over stat, list, getchunks, create, mkdir, rename, delete")
	shares := fs.String("shares", "0,20,50,100", "percent of reads sent to observers, one column each")
	scales := fs.String("write-scales", "2,4", "rates of the write-only columns, times the mixed workload's write rate")
	clients := fs.Int("clients", def.Clients, "clients of the load generator; each share must be a whole number of them")
	voters := fs.Int("voters", def.Voters, "voting masters")
	observers := fs.Int("observers", def.Observers, "observer masters")
	cpu := fs.Float64("master-cpu", def.MasterCPU, "CPU cap of each master, in CPUs (cgroup v1 cpu.cfs_quota_us)")
	seed := fs.Uint64("seed", def.Seed, "seed of the operation sequence")
	prefix := fs.String("prefix", def.Prefix, "prefix of the namespaces and cgroups the run makes (at most 8 bytes)")
	workDir := fs.String("work-dir", "", "directory for the servers' data and logs (default: the system's temporary directory)")
	fs.StringVar(&out, "out", "bench-out", "directory for observers.md and observers.json")
	fs.BoolVar(&verbose, "v", false, "log every command run")
	if err := parseBench(fs, args); err != nil {
		return cfg, "", false, err
	}
	cfg = def
	if *quick {
		cfg = bench.QuickObserversConfig()
	}
	setIf(&cfg.Rate, *rate)
	setIf(&cfg.Duration, *dur)
	cfg.Clients, cfg.Voters, cfg.Observers, cfg.MasterCPU, cfg.Seed = *clients, *voters, *observers, *cpu, *seed
	cfg.Prefix, cfg.WorkDir = *prefix, *workDir
	if cfg.Mix, err = bench.ParseMix(*mix); err != nil {
		return cfg, "", false, benchUsage("--mix: %v", err)
	}
	if cfg.Shares, err = parseFloats(*shares, 100); err != nil {
		return cfg, "", false, benchUsage("--shares: %v", err)
	}
	if cfg.WriteScales, err = parseFloats(*scales, 1); err != nil {
		return cfg, "", false, benchUsage("--write-scales: %v", err)
	}
	return cfg, out, verbose, nil
}

// parseFloats parses comma-separated numbers, each divided by unit; an
// empty string is none.
func parseFloats(s string, unit float64) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q is not a non-negative number", f)
		}
		out = append(out, v/unit)
	}
	return out, nil
}
