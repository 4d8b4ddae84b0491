package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/chunkfs/chunkfs/internal/bench"
)

// runBench is `chunkfs bench gfs`: the GFS paper's Figure 3 (reads, writes
// and record appends by N clients) on a shaped network-namespace testbed.
// It needs root.
// benchSubcommands are bench's subcommands, the default first.
var benchSubcommands = []string{"gfs", "recovery", "observers", "metadata", "smallfile"}

func runBench(ctx context.Context, args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		_, _, _, err := benchFlags(args) // prints the flags of bench gfs
		return err
	}
	if len(args) > 0 && args[0] == "observers" {
		return runBenchObservers(ctx, args[1:])
	}
	if len(args) > 0 && args[0] == "recovery" {
		return runBenchRecovery(ctx, args[1:])
	}
	if len(args) > 0 && args[0] == "metadata" {
		return runBenchMetadata(ctx, args[1:])
	}
	if len(args) > 0 && args[0] == "smallfile" {
		return runBenchSmallfile(ctx, args[1:])
	}
	if len(args) == 0 || args[0] != "gfs" {
		return benchUsage("usage: chunkfs bench gfs [--quick] [--scale F] [--clients 1,2,4,8,16] [--tls] [--out DIR]\n       chunkfs bench recovery [--quick] [--servers N] [--fill BYTES] [--out DIR]\n       chunkfs bench observers [--quick] [--rate N] [--duration D] [--out DIR]\n       chunkfs bench metadata [--scale F] [--clients N] [--fleet N] [--out DIR]\n       chunkfs bench smallfile [--files N] [--procs 1,4] [--mount DIR] [--mount-args FLAGS]")
	}
	cfg, out, verbose, err := benchFlags(args[1:])
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
	// Ctrl-C and SIGTERM cancel the run, which tears the testbed down.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg, log)
	if rep != nil && (len(rep.Points) > 0 || len(rep.Network) > 0) {
		if terr := benchOutput(rep, out, cfg.Events); terr != nil {
			err = errors.Join(err, terr)
		}
	}
	if err == nil && len(rep.Failed()) > 0 {
		err = fmt.Errorf("%d of %d points failed", len(rep.Failed()), len(rep.Points))
	}
	return err
}

// benchOutput prints the table and writes the CSV and the figure (PNG,
// SVG), and with events the JSON of every event.
func benchOutput(rep *bench.Report, out string, events bool) error {
	if err := rep.WriteTable(os.Stdout); err != nil {
		return err
	}
	paths, err := rep.SaveFiles(out, events)
	for _, p := range paths {
		fmt.Fprintf(os.Stdout, "wrote %s\n", p)
	}
	return err
}

// benchFlags parses the options of `chunkfs bench gfs`.
func benchFlags(args []string) (cfg bench.Config, out string, verbose bool, err error) {
	fs := flag.NewFlagSet("bench gfs", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "a smoke run: 3 chunkservers, N = 1,2, about 2 s a point")
	scale := fs.Float64("scale", 0.1, "network rates relative to the paper's (100 Mbit/s NICs, 1 Gbit/s link)")
	clients := fs.String("clients", "", "values of N, comma-separated (default 1,2,4,8,16; --quick: 1,2)")
	workloads := fs.String("workloads", "reads,writes,appends", "workloads to run, comma-separated")
	duration := fs.Duration("duration", 0, "about how long each point takes at its limit (default 80s, the paper's; --quick: 2s)")
	record := fs.Int64("record-size", 0, "record append size in bytes (default 1 MiB)")
	write := fs.Int64("write-size", 0, "write size in bytes (default 1 MiB, as in the paper)")
	queue := fs.Int("queue", 0, "bytes of buffer of each switch port and NIC queue (default 256 KiB)")
	hostQueue := fs.String("host-queue", bench.QueueFQ, "queueing under each host NIC's shaper: fq (flow queueing, Linux's default) or fifo")
	fqBuckets := fs.Int("fq-buckets", 0, "flow queues under each host NIC's shaper with --host-queue fq: a power of two, 4-64 (default 16)")
	tcp := fs.String("tcp", "", "TCP congestion control of the testbed's hosts (default reno; \"inherit\": what a new namespace gets from the machine)")
	chunkSize := fs.Int64("chunk-size", 0, "chunk size of the file system the reads and appends run on (default: the master's, 64 MiB)")
	writeChunkSize := fs.String("write-chunk-size", "", "chunk size of the write panel's labelled variant, run after the headline on --chunk-size's chunks (default 1 MiB; 0: no variant)")
	calibrate := fs.Bool("calibrate", true, "first measure raw TCP across the testbed for every N")
	probe := fs.Bool("probe", true, "time each step of one client's writes and appends on the idle cluster")
	warmup := fs.Bool("warmup", true, "write to every fresh cluster before its first point, unmeasured, so the first point does not pay for first chunks and connections")
	networkOnly := fs.Bool("network-only", false, "build the testbed and measure raw TCP only, with no cluster")
	prefix := fs.String("netns-prefix", bench.DefaultPrefix, "start of the testbed's namespace names (1-8 bytes), so that two runs on one machine do not meet")
	useTLS := fs.Bool("tls", false, "run the cluster with mutual TLS on every connection (certificates made in the work directory); without it, plain TCP")
	workDir := fs.String("work-dir", "", "where the servers keep their data and logs (default: the system temp dir)")
	fs.StringVar(&out, "out", "bench-out", "directory for gfs.csv, gfs.png and gfs.svg")
	events := fs.Bool("json", false, "also write gfs.json: the whole report with every client's operation times and trace events")
	fs.BoolVar(&verbose, "v", false, "log every command the testbed runs")
	if err := parseBench(fs, args); err != nil {
		return cfg, "", false, err
	}
	cfg = bench.DefaultConfig()
	if *quick {
		cfg = bench.QuickConfig()
	}
	if *scale <= 0 || *scale > 10 {
		return cfg, "", false, benchUsage("--scale %g out of range (0, 10]", *scale)
	}
	cfg.WithScale(*scale)
	if *clients != "" {
		if cfg.Clients, err = parseInts(*clients); err != nil {
			return cfg, "", false, benchUsage("--clients: %v", err)
		}
		cfg.Testbed.Clients = max(cfg.Testbed.Clients, maxInt(cfg.Clients))
	}
	if cfg.Workloads, err = bench.ParseWorkloads(*workloads); err != nil {
		return cfg, "", false, benchUsage("--workloads: %v", err)
	}
	setIf(&cfg.Duration, *duration)
	setIf(&cfg.RecordSize, *record)
	setIf(&cfg.WriteSize, *write)
	setIf(&cfg.Testbed.Queue, *queue)
	cfg.Testbed.HostQueue = *hostQueue
	cfg.Testbed.FQBuckets = *fqBuckets
	switch *tcp {
	case "":
	case "inherit":
		cfg.Testbed.TCP = ""
	default:
		cfg.Testbed.TCP = *tcp
	}
	if *chunkSize < 0 {
		return cfg, "", false, benchUsage("--chunk-size %d is negative", *chunkSize)
	}
	cfg.ChunkSize = *chunkSize
	if *writeChunkSize != "" {
		n, err := strconv.ParseInt(*writeChunkSize, 10, 64)
		if err != nil || n < 0 {
			return cfg, "", false, benchUsage("--write-chunk-size %q is not a size in bytes", *writeChunkSize)
		}
		cfg.WriteChunkSize = n
	}
	cfg.Calibrate, cfg.Probe, cfg.Warmup, cfg.NetworkOnly, cfg.WorkDir = *calibrate, *probe, *warmup, *networkOnly, *workDir
	cfg.TLS, cfg.Events = *useTLS, *events
	cfg.Testbed.Prefix = *prefix
	return cfg, out, verbose, nil
}

func setIf[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func maxInt(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// runBenchWorker is the hidden `chunkfs bench-worker` subcommand: one
// benchmark client, run by `chunkfs bench` inside a client's network
// namespace. It reads its task from standard input and reports on standard
// output (JSON lines).
func runBenchWorker(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return benchUsage("bench-worker takes no arguments; it is started by chunkfs bench")
	}
	return bench.WorkerMain(ctx, os.Stdin, os.Stdout)
}

// benchUsage is an error in the command line of chunkfs bench.
// parseBench parses a bench subcommand's flags, which take no operands:
// --help prints them on stdout (and returns flag.ErrHelp), anything else
// wrong is one line.
func parseBench(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return err
		}
		return benchUsage("%v", err)
	}
	if fs.NArg() > 0 {
		return benchUsage("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// writeBenchFiles prints text and writes it to out/base.ext (ext: txt or
// md) beside out/base.json, rep as JSON.
func writeBenchFiles(out, base, ext, text string, rep any) error {
	fmt.Print(text)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{base + ".json": js, base + "." + ext: []byte(text)} {
		p := filepath.Join(out, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
		fmt.Printf("wrote %s\n", p)
	}
	return nil
}

func benchUsage(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

// benchSetup returns this binary (the benchmarks start it as servers and
// as bench-worker) and a logger at the verbosity asked for.
func benchSetup(verbose bool) (string, *slog.Logger, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return exe, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})), nil
}
