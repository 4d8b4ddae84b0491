package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/fusefs"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// runMount is `chunkfs mount [--master ADDR] [cache options] DIR`: it
// mounts the cluster on DIR with FUSE and serves it until `chunkfs umount
// DIR`, Ctrl-C or SIGTERM.
func runMount(ctx context.Context, args []string) error {
	o, err := mountFlags(args)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	if o.fuse.Debug {
		level = slog.LevelDebug // go-fuse logs every request at debug level
	}
	level = o.logLevel.or(level)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	reloadCRLOnHangup(ctx, o.security, log)
	return serveMount(ctx, o, log)
}

// mountOptions is what the command line of `chunkfs mount` says.
type mountOptions struct {
	master      string
	dir         string
	noCloseSync bool // a written file's release leaves its replicas to sync it (--close-sync=false)
	fuse        fusefs.Config
	verbose     bool
	logLevel    logLevel
	leaderReads bool
	autoMsync   time.Duration
	http        httpFlags // /metrics (status_http.go)
	security    *rpc.Security
}

// serveMount mounts and blocks until the mount goes away or ctx ends, then
// unmounts (lazily if files are still open).
func serveMount(ctx context.Context, o mountOptions, log *slog.Logger) error {
	cc := client.DefaultConfig()
	cc.Master = o.master
	cc.Security = o.security
	cc.RetryTimeout = o.fuse.OpTimeout
	cc.LeaderReads, cc.AutoMsync = o.leaderReads, o.autoMsync
	cc.Logger = log
	dialCtx, cancel := context.WithTimeout(ctx, o.fuse.MountTimeout)
	b, err := fusefs.NewClientBackend(dialCtx, cc)
	cancel()
	if err != nil {
		return fmt.Errorf("master %s not reachable: %w", o.master, err)
	}
	defer b.Close()
	b.SyncOnClose(!o.noCloseSync)
	observed, cfg := mountMetrics(ctx, o.http, b, o.fuse)
	srv, err := fusefs.Mount(ctx, o.dir, observed, cfg, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "chunkfs: %s mounted on %s (Ctrl-C or `chunkfs umount %s` to unmount)\n", o.master, o.dir, o.dir)
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	if err := srv.Unmount(); err != nil {
		log.Warn("unmount busy; detaching lazily", "dir", o.dir, "err", err)
		if err := fusefs.Unmount(o.dir, true); err != nil {
			return err
		}
	}
	<-done
	return nil
}

// mountFlags parses the command line of `chunkfs mount`.
func mountFlags(args []string) (mountOptions, error) {
	o := mountOptions{fuse: fusefs.DefaultConfig()}
	c := &o.fuse
	fs := flag.NewFlagSet("mount", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.master, "master", "", "master address host:port (default $CHUNKFS_MASTER or "+defaultMaster+")")
	noCache := fs.Bool("no-cache", false, "turn every cache layer off: each operation asks the cluster")
	fs.DurationVar(&c.AttrTimeout, "attr-timeout", c.AttrTimeout, "md-cache: how long the kernel trusts file attributes")
	fs.DurationVar(&c.EntryTimeout, "entry-timeout", c.EntryTimeout, "md-cache: how long the kernel trusts name lookups")
	fs.DurationVar(&c.NegativeTimeout, "negative-timeout", c.NegativeTimeout, "md-cache: how long the kernel remembers missing names")
	fs.DurationVar(&c.PrefetchTimeout, "prefetch-timeout", c.PrefetchTimeout, "stat-prefetch: how long one listing of a directory answers a burst of look-ups in it (0: off)")
	readAhead := fs.String("read-ahead", size(c.ReadAhead), "read-ahead: bytes a sequential read fetches at once (0: off)")
	writeBehind := fs.String("write-behind", size(c.WriteBehind), "write-behind: bytes an open file buffers before pushing (0: write through)")
	quickRead := fs.String("quick-read", size(c.QuickRead), "quick-read: files up to this size are read whole on open (0: off)")
	fs.BoolVar(&c.KeepCache, "io-cache", c.KeepCache, "io-cache: keep the kernel page cache across opens of an unchanged file")
	cacheSize := fs.String("cache-size", size(int(c.CacheSize)), "io-cache: bytes of file data the mount keeps in its own memory across opens (0: off)")
	fs.BoolVar(&c.WritebackCache, "writeback-cache", c.WritebackCache, "write-behind: let the kernel buffer writes in its page cache (close and fsync still push them)")
	dirtyLimit := fs.String("dirty-limit", size(int(c.DirtyLimit)), "write-behind: dirty bytes the kernel may hold for the mount (root only; 0: the kernel's FUSE limit)")
	fs.IntVar(&c.AsyncClose, "async-close", 0, "close(2) of a written file returns before its push; up to N files' pushes run in the background (fsync waits; a failed push is returned by the file's next close or fsync; 0: close waits)")
	fs.IntVar(&c.AsyncCreate, "async-create", 0, "create(2) returns before the master has the file; up to N creates run in the background, in batches (the file's I/O, fsync and other calls naming it wait; a refused create drops the name and fails the file's close or fsync with EIO; 0: create waits)")
	closeSync := fs.Bool("close-sync", true, "the release after the last close of a written file makes every replica fsync it (false: data is on every replica at close, on their disks after fsync(2) or their own write-out)")
	fs.DurationVar(&c.OpTimeout, "op-timeout", c.OpTimeout, "a call to the cluster fails with EIO after this long")
	fs.DurationVar(&c.MountTimeout, "mount-timeout", 10*time.Second, "give up mounting if the master does not answer in this long")
	fs.BoolVar(&c.AllowOther, "allow-other", false, "let other users use the mount (the kernel checks their permissions)")
	fs.BoolVar(&c.Debug, "debug", false, "log every FUSE request")
	fs.BoolVar(&o.verbose, "v", false, "log mount activity")
	addLogLevel(fs, &o.logLevel, "warn, info with -v")
	o.http.add(fs)
	fs.BoolVar(&o.leaderReads, "leader-reads", false, "with a group of masters, send every call to the leader, no reads to observers")
	fs.DurationVar(&o.autoMsync, "auto-msync", time.Second, "with observers, sync with the leader before a read when this long has passed since the last sync (0: never)")
	tf := addTLSFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stdout, "Usage: chunkfs mount [flags] DIR")
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return o, err
		}
		return o, usagef("%v", err)
	}
	if fs.NArg() != 1 {
		return o, usagef("usage: chunkfs mount [--master ADDR] [flags] DIR")
	}
	o.dir = fs.Arg(0)
	o.noCloseSync = !*closeSync
	if o.master == "" {
		o.master = os.Getenv("CHUNKFS_MASTER")
	}
	if o.master == "" {
		o.master = defaultMaster
	}
	var err error
	for _, s := range []struct {
		name string
		arg  string
		dst  *int
	}{{"read-ahead", *readAhead, &c.ReadAhead}, {"write-behind", *writeBehind, &c.WriteBehind}, {"quick-read", *quickRead, &c.QuickRead}} {
		if *s.dst, err = parseSize(s.arg); err != nil {
			return o, usagef("--%s: %v", s.name, err)
		}
	}
	for _, s := range []struct {
		name string
		arg  string
		dst  *int64
	}{{"cache-size", *cacheSize, &c.CacheSize}, {"dirty-limit", *dirtyLimit, &c.DirtyLimit}} {
		n, err := parseSize(s.arg)
		if err != nil {
			return o, usagef("--%s: %v", s.name, err)
		}
		*s.dst = int64(n)
	}
	if *noCache {
		*c = c.NoCache()
	}
	if o.security, err = tf.security(os.Getenv); err != nil {
		return o, err
	}
	if err := singleUserMount(o.security, c.AllowOther, uint32(os.Getuid())); err != nil {
		return o, err
	}
	if err := c.Validate(); err != nil {
		return o, usagef("%v", err)
	}
	return o, nil
}

// runUmount is `chunkfs umount [-l] DIR`: it unmounts a chunkfs mount;
// -l detaches it even while files are open on it.
func runUmount(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("umount", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	lazy := fs.Bool("l", false, "lazy: detach now, finish when the last file closes")
	if err := fs.Parse(args); err != nil {
		return usagef("%v", err)
	}
	if fs.NArg() != 1 {
		return usagef("usage: chunkfs umount [-l] DIR")
	}
	return fusefs.Unmount(fs.Arg(0), *lazy)
}

// size prints a byte count the way parseSize reads it.
func size(n int) string {
	for _, u := range []struct {
		s string
		n int
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.n && n%u.n == 0 {
			return strconv.Itoa(n/u.n) + u.s
		}
	}
	return strconv.Itoa(n)
}

// parseSize reads a byte count with an optional K, M or G suffix (powers
// of 1024).
func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "k"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"), strings.HasSuffix(s, "m"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"), strings.HasSuffix(s, "g"):
		mult = 1 << 30
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > (1<<31)/mult {
		return 0, fmt.Errorf("%q is not a size (like 512K or 8M)", s)
	}
	return n * mult, nil
}

// singleUserMount refuses a mount that would serve no one: one whose
// certificate is a plain user's (it serves only that UID, see
// fusefs.ClientBackend) run by another user without --allow-other, which
// the kernel lets in alone.
func singleUserMount(sec *rpc.Security, allowOther bool, uid uint32) error {
	if sec.IsInsecure() || sec.Identity().Proxy || allowOther {
		return nil
	}
	if id := sec.Identity(); id.UID != uid {
		return usagef("this %s certificate (%s) acts only as uid %d, and without --allow-other only uid %d may use the mount: "+
			"run the mount as uid %d, give --allow-other, or use a mount certificate with the proxy privilege", id.Role, id.Name, id.UID, uid, id.UID)
	}
	return nil
}
