package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

const masterExample = `  chunkfs master --dir /var/lib/chunkfs/master --listen 127.0.0.1:7070 --tls-dir /etc/chunkfs/m1

  # a group of three masters and an observer, one command on each host:
  chunkfs master --id m1 --dir /var/lib/chunkfs/master --listen 10.0.0.1:7070 --tls-dir /etc/chunkfs/m1 \
      --cluster m1=10.0.0.1:7070,m2=10.0.0.2:7070,m3=10.0.0.3:7070
  chunkfs master --id o1 --observer --dir /var/lib/chunkfs/master --listen 10.0.0.4:7070 --tls-dir /etc/chunkfs/o1 \
      --cluster m1=10.0.0.1:7070,m2=10.0.0.2:7070,m3=10.0.0.3:7070`

// runMaster runs `chunkfs master`: it serves the master on --listen with its
// state in --dir until ctx ends (SIGINT or SIGTERM), then stops gracefully.
func runMaster(ctx context.Context, args []string) error {
	var hf httpFlags
	cfg, listen, err := masterFlags(args, hf.add)
	if err != nil {
		return err
	}
	reloadCRLOnHangup(ctx, cfg.Security, cfg.Logger)
	status := newMasterStatus(hf, &cfg)
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %v", listen, err)
	}
	serveOn := lis
	if grouped := len(cfg.Members) > 0 || cfg.Observer; grouped || !cfg.Security.IsInsecure() {
		// One port for clients, chunkservers and the other masters' Raft,
		// TLS terminated before the protocol is told apart.
		mux := cfg.Security.NewMux(lis, cfg.Logger)
		serveOn = mux.GRPC()
		if grouped {
			cfg.RaftListener = mux.Raft()
		}
		go mux.Serve()
		defer mux.Close()
	}
	if cfg.Security.IsInsecure() {
		cfg.Logger.Warn("serving plain TCP (--insecure): no TLS, no certificates")
	}
	m, err := master.Open(cfg)
	if err != nil {
		lis.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- m.Serve(serveOn) }()
	if status != nil {
		if _, err := status.serve(ctx, os.Stderr, cfg.Logger, cmp.Or(cfg.Addr, listen), cfg.Security, func() *master.Master { return m }, m.Traffic); err != nil {
			cfg.Logger.Error("status page", "err", err)
		}
	}
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
// extra defines further flags (the status server's).
func masterFlags(args []string, extra ...func(*flag.FlagSet)) (master.Config, string, error) {
	cfg := master.DefaultConfig()
	fs := flag.NewFlagSet("master", flag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	dir := fs.String("dir", "", "data directory: lock file, operation log and checkpoints (required)")
	listen := fs.String("listen", "127.0.0.1:7070", "`HOST:PORT` to serve clients and chunkservers on")
	chunkSize := fs.Int64("chunk-size", cfg.ChunkSize, "chunk size in bytes for a new file system (fixed once made)")
	repl := fs.Int("replication", cfg.DefaultReplication, "default replicas per chunk for a new file system")
	lease := fs.Duration("lease", cfg.LeaseDuration, "chunk lease duration")
	noAdopt := fs.Bool("no-lease-adoption", false, "after a take-over or restart, wait out every lease the previous leader may have granted instead of adopting those chunkservers report (GFS)")
	deadAfter := fs.Duration("dead-after", cfg.DeadAfter, "declare a chunkserver dead after this long without a heartbeat")
	minRepl := fs.Int("min-replicas", cfg.MinReplicas, "fewest replicas a write is acknowledged with when fewer than a file's replication can take it")
	reserve := fs.Int64("reserve", cfg.Placement.MinFree, "free bytes a chunkserver keeps: one with less gets no new replica")
	safeThreshold := fs.Float64("safe-mode-threshold", cfg.SafeModeThreshold, "fraction of chunks with data that must be located before leaving safe mode after a start")
	safeServers := fs.Int("safe-mode-servers", cfg.SafeModeMinServers, "live chunkservers safe mode waits for (0: --min-replicas)")
	maxClones := fs.Int("max-clones", cfg.MaxClonesPerServer, "re-replications in flight per chunkserver as source, and apart as target")
	balance := fs.Bool("balance", cfg.Balance, "run the rebalancer from the start (admin balance starts and stops it later)")
	balanceThreshold := fs.Float64("balance-threshold", cfg.BalanceThreshold, "rebalancer target: every live chunkserver within this many percentage points of the mean utilisation")
	balanceMoves := fs.Int("balance-moves", cfg.BalanceMaxMoves, "rebalancer moves in flight (each also within --max-clones)")
	cloneMinRate := fs.String("clone-min-rate", size(int(cfg.MinCloneRate)), "slowest clone transfer a clone's deadline allows for, bytes a second with a K, M or G suffix (at most the chunkservers' --clone-rate / --clone-streams)")
	id := fs.String("id", cfg.NodeID, "this master's node ID in its group")
	group := fs.String("cluster", "", "the group's voters as `ID=HOST:PORT,...` (their client addresses, which also carry Raft); empty: a master alone")
	observer := fs.Bool("observer", false, "join the group named by --cluster as a non-voting observer that serves reads")
	addr := fs.String("addr", "", "address the other masters and clients reach this one on (default: its --cluster entry, or --listen)")
	readWait := fs.Duration("read-wait", cfg.ReadWait, "how long a standby or observer waits to catch up with a client's state before refusing the read")
	keyPeriod := fs.Duration("token-key-period", cfg.TokenKeyPeriod, "how long each chunk-access-token key signs before the next takes over (secure clusters)")
	tokenLife := fs.Duration("token-lifetime", cfg.TokenLifetime, "how long a chunk access token is valid; clients refresh expired ones")
	trashPeriod := fs.Duration("trash-period", cfg.TrashPeriod, "keep deleted files this long in the trash, where chunkfs undelete brings them back; 0 deletes at once (at most 10 years)")
	queueStats := fs.String("queue-stats", "", "write a JSON summary of the RPC queue times to `FILE` on exit")
	superGroup := fs.Uint("superuser-group", uint(cfg.SuperuserGroup), "`GID` whose members, with uid 0, are the superuser: every permission and the admin calls")
	verbose := fs.Bool("v", false, "log informational messages")
	var ll logLevel
	addLogLevel(fs, &ll, "warn, info with -v")
	for _, add := range extra {
		add(fs)
	}
	tf := addTLSFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(&out, "Usage: chunkfs master --dir DIR --listen HOST:PORT [--id ID --cluster ID=HOST:PORT,... [--observer]] [flags]\n\nFlags:\n")
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
	level = ll.or(level)
	cfg.Dir, cfg.ChunkSize, cfg.DefaultReplication, cfg.LeaseDuration, cfg.DeadAfter = *dir, *chunkSize, *repl, *lease, *deadAfter
	cfg.NoLeaseAdoption = *noAdopt
	cfg.MinReplicas, cfg.Placement.MinFree, cfg.MaxClonesPerServer = *minRepl, *reserve, *maxClones
	cfg.SafeModeThreshold, cfg.SafeModeMinServers = *safeThreshold, *safeServers
	cfg.Balance, cfg.BalanceThreshold, cfg.BalanceMaxMoves = *balance, *balanceThreshold, *balanceMoves
	n, err := parseSize(*cloneMinRate)
	if err != nil || n == 0 {
		return cfg, "", usagef("--clone-min-rate: %q is not a positive rate (like 256K)", *cloneMinRate)
	}
	cfg.MinCloneRate = int64(n)
	cfg.NodeID, cfg.Observer, cfg.ReadWait = *id, *observer, *readWait
	cfg.TokenKeyPeriod, cfg.TokenLifetime = *keyPeriod, *tokenLife
	cfg.QueueStatsFile = *queueStats
	if *trashPeriod < 0 || trashPeriod.Nanoseconds() > namespace.MaxTrashPeriod {
		return cfg, "", usagef("--trash-period %v: want 0 (delete at once) up to 10 years", *trashPeriod)
	}
	cfg.TrashPeriod = *trashPeriod
	if *superGroup > 1<<32-1 {
		return cfg, "", usagef("--superuser-group %d is not a 32-bit GID", *superGroup)
	}
	cfg.SuperuserGroup = uint32(*superGroup)
	members, err := parseGroup(*group)
	if err != nil {
		return cfg, "", err
	}
	if *observer && len(members) == 0 {
		return cfg, "", usagef("--observer needs --cluster: the group it joins")
	}
	cfg.Members, cfg.Addr = members, *addr
	for _, mb := range members {
		if mb.ID == cfg.NodeID && cfg.Addr == "" {
			cfg.Addr = mb.Addr
		}
	}
	if cfg.Addr == "" && len(members) > 0 {
		cfg.Addr = *listen
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if cfg.Security, err = tf.security(os.Getenv); err != nil {
		return cfg, "", err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, "", usagef("%v", err)
	}
	return cfg, *listen, nil
}

// parseGroup parses --cluster: ID=HOST:PORT pairs, comma-separated.
func parseGroup(s string) ([]master.Member, error) {
	if s == "" {
		return nil, nil
	}
	var out []master.Member
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" || addr == "" {
			return nil, usagef("--cluster entry %q: want ID=HOST:PORT", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, usagef("--cluster entry %q: %v", part, err)
		}
		out = append(out, master.Member{ID: id, Addr: addr})
	}
	return out, nil
}
