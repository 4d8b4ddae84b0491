package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/metrics"
	"github.com/chunkfs/chunkfs/internal/web"
)

const chunkserverUsage = `Usage: chunkfs chunkserver --dir DIR[,DIR...] --listen HOST:PORT --master ADDR[,ADDR...] [--rack NAME] [flags]

Runs a chunkserver: keeps chunk replicas in the data directories, serves
gRPC control calls and the bulk data stream on one port, and registers and
heartbeats with every master named.

Example:
  chunkfs chunkserver --dir /data1/chunkfs,/data2/chunkfs --listen 0.0.0.0:7080 \
      --addr cs1.example:7080 --master m1.example:7070 --rack r1

Flags:`

// chunkserverOptions is the parsed command line of `chunkfs chunkserver`.
type chunkserverOptions struct {
	cfg      chunkserver.Config
	listen   string
	verbose  bool
	logLevel logLevel
	http     httpFlags // status page and /metrics (status_http.go)
}

// runChunkserver runs a chunkserver until ctx is cancelled.
func runChunkserver(ctx context.Context, args []string) error {
	o, err := chunkserverFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	level = o.logLevel.or(level)
	o.cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var reg *metrics.Registry
	var recent *web.Recent
	if o.http.addr != "" {
		reg, recent = metrics.New(), web.NewRecent(recentKept)
		o.cfg.OnCall = reg.ObserveCall
		o.cfg.Logger = slog.New(recent.Handler(o.cfg.Logger.Handler()))
	}
	reloadCRLOnHangup(ctx, o.cfg.Security, o.cfg.Logger)
	s, err := chunkserver.Open(o.cfg)
	if err != nil {
		return err
	}
	if reg != nil {
		if err := serveChunkserverStatus(ctx, os.Stderr, o.http, reg, recent, o.cfg.Logger, s); err != nil {
			s.Close()
			return err
		}
	}
	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		s.Close()
		return err
	}
	if o.cfg.Security.IsInsecure() {
		o.cfg.Logger.Warn("serving plain TCP (--insecure): no TLS, no certificates")
	}
	o.cfg.Logger.Info("chunkserver listening", "listen", lis.Addr().String(), "id", s.ID(), "dirs", o.cfg.Dirs, "masters", o.cfg.Masters)
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		s.Close()
		return <-done
	}
}

// chunkserverFlags parses the command line into a configuration.
func chunkserverFlags(args []string) (chunkserverOptions, error) {
	o := chunkserverOptions{cfg: chunkserver.DefaultConfig()}
	c := &o.cfg
	fs := flag.NewFlagSet("chunkserver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dirs := fs.String("dir", "", "data directories, comma-separated (the first keeps the server ID)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:7080", "address to listen on, host:port")
	masters := fs.String("master", "", "master addresses, comma-separated (default $CHUNKFS_MASTER or "+defaultMaster+")")
	fs.StringVar(&c.Rack, "rack", "default", "rack name, for replica placement")
	fs.StringVar(&c.Addr, "addr", "", "address masters and clients reach this server on (default: the listen address)")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat", c.HeartbeatInterval, "interval between heartbeats to each master")
	buffer := fs.String("buffer", size(int(c.BufferBytes)), "memory for pushed data awaiting a write")
	fs.DurationVar(&c.BufferExpiry, "buffer-expiry", c.BufferExpiry, "pushed data not written within this is dropped")
	fs.DurationVar(&c.ScrubInterval, "scrub", c.ScrubInterval, "verify one idle chunk every interval (0: never)")
	fs.IntVar(&c.CloneStreams, "clone-streams", c.CloneStreams, "re-replication clones this server runs at once as a target; more are refused for the master to retry")
	cloneRate := fs.String("clone-rate", size(int(c.CloneRate)), "bytes a second all clones into this server pull together, with a K, M or G suffix (0: unlimited)")
	sourceRate := fs.String("clone-source-rate", size(int(c.CloneSourceRate)), "bytes a second all clones this server is the source of send together, each paced (suffix K, M, G; 0: unlimited); a clone of a chunk with no other live replica is not held to it")
	yieldRate := fs.String("urgent-yield-rate", size(int(c.UrgentYieldRate)), "bytes a second this server's other reads, clients' and clones', share while it sources a clone of a chunk with no other live replica, each paced (suffix K, M, G; 0: they do not yield)")
	reserve := fs.String("reserve", size(int(c.Reserve)), "free space each disk keeps: no new replica goes to a disk with less (suffix K, M, G)")
	fs.DurationVar(&c.StreamIdle, "stream-idle", c.StreamIdle, "close a data-stream connection that sends no request for this long (clients reuse theirs for 15s)")
	fs.BoolVar(&o.verbose, "v", false, "log debugging detail")
	addLogLevel(fs, &o.logLevel, "info, debug with -v")
	o.http.add(fs)
	tf := addTLSFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stdout, chunkserverUsage)
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return o, err
		}
		return o, usagef("%v", err)
	}
	if fs.NArg() != 0 {
		return o, usagef("chunkserver: unexpected argument %q", fs.Arg(0))
	}
	c.Dirs = splitList(*dirs)
	if len(c.Dirs) == 0 {
		return o, usagef("chunkserver: --dir is required")
	}
	if *masters == "" {
		*masters = os.Getenv("CHUNKFS_MASTER")
	}
	if *masters == "" {
		*masters = defaultMaster
	}
	c.Masters = splitList(*masters)
	n, err := parseSize(*buffer)
	if err != nil {
		return o, usagef("--buffer: %v", err)
	}
	c.BufferBytes = int64(n)
	if n, err = parseSize(*cloneRate); err != nil {
		return o, usagef("--clone-rate: %v", err)
	}
	c.CloneRate = int64(n)
	if n, err = parseSize(*sourceRate); err != nil {
		return o, usagef("--clone-source-rate: %v", err)
	}
	c.CloneSourceRate = int64(n)
	if n, err = parseSize(*yieldRate); err != nil {
		return o, usagef("--urgent-yield-rate: %v", err)
	}
	c.UrgentYieldRate = int64(n)
	if n, err = parseSize(*reserve); err != nil {
		return o, usagef("--reserve: %v", err)
	}
	c.Reserve = int64(n)
	if c.Security, err = tf.security(os.Getenv); err != nil {
		return o, err
	}
	if err := c.Validate(); err != nil {
		return o, usagef("%v", err)
	}
	return o, nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
