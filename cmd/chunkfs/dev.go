package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/cluster"
	"github.com/chunkfs/chunkfs/internal/fusefs"
	"github.com/chunkfs/chunkfs/internal/master"
)

var devCommand = &command{
	name:    "dev",
	args:    "[--dir DIR] [--listen HOST:PORT] [--masters N [--observers M]] [--mount DIR] [--tls]",
	summary: "run a whole cluster (master + 3 chunkservers) in this process, for trying chunkfs out; plain TCP unless --tls",
	example: "  chunkfs dev &\n  export CHUNKFS_INSECURE=1\n  chunkfs put README.md /\n  chunkfs ls -l /\n\n  # a highly available group: three voting masters and two observers\n  chunkfs dev --masters 3 --observers 2",
	run:     runDev,
}

func runDev(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	dir := fs.String("dir", "", "data directory (default: the user cache directory's chunkfs/dev)")
	listen := fs.String("listen", defaultMaster, "master address")
	chunkSize := fs.Int64("chunk-size", chunkfs.DefaultChunkSize, "chunk size in bytes (a multiple of 64 KiB); fixed when the directory is first used")
	verbose := fs.Bool("v", false, "log server activity to stderr")
	mountDir := fs.String("mount", "", "also mount the cluster on this directory with FUSE (default cache options)")
	masters := fs.Int("masters", 1, "voting masters: more than one runs a highly available group, on --listen and the ports after it")
	observers := fs.Int("observers", 0, "observer masters of the group, which serve reads (ports after the voters')")
	var hf httpFlags
	hf.addDefault(fs, "127.0.0.1:0")
	useTLS := fs.Bool("tls", false, "mutual TLS: make a CA and certificates under DIR/tls (a new CA each start) and print the client's --tls-dir")
	ops, err := parse(e, fs, args)
	if err != nil {
		return err
	}
	if len(ops) > 0 {
		return usagef("unexpected arguments %q", ops)
	}
	if *dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("no --dir and no user cache directory: %w", err)
		}
		*dir = filepath.Join(cache, "chunkfs", "dev")
	}
	if *masters < 1 || *observers < 0 || *masters+*observers > 9 {
		return usagef("--masters %d --observers %d: want at least one master, no negative count, at most 9 in all", *masters, *observers)
	}
	cfg := cluster.DefaultConfig()
	cfg.Dir = *dir
	cfg.TrashPeriod = master.DefaultTrashPeriod
	cfg.MasterAddr = *listen
	cfg.ChunkserverAddrs = nextFreePorts(*listen, cfg.Chunkservers)
	if group := *masters + *observers; group > 1 {
		cfg.Masters, cfg.Observers = *masters, *observers
		addrs := nextFreePorts(*listen, group-1+cfg.Chunkservers)
		cfg.GroupAddrs = append([]string{*listen}, addrs[:min(len(addrs), group-1)]...)
		cfg.ChunkserverAddrs = nil
		if len(addrs) >= group-1 {
			cfg.ChunkserverAddrs = addrs[group-1:]
		}
	}
	cfg.ChunkSize = *chunkSize
	cfg.Heartbeat = time.Second
	cfg.DeadAfter = 10 * time.Second
	cfg.Lease = chunkfs.LeaseDuration
	cfg.TLS = *useTLS
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(e.stderr, nil))
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	status := newMasterStatus(hf, &master.Config{})
	if status != nil {
		cfg.Master = status.configure
	}
	c, err := cluster.Start(cfg)
	if err != nil {
		return err
	}
	if status != nil {
		if _, err := serveDevStatus(ctx, e, status, c); err != nil {
			c.Close()
			return err
		}
	}
	printDevBanner(e, c, *dir)
	var mountErr error
	if *mountDir != "" {
		mountErr = serveDevMount(ctx, e, c, *mountDir)
	} else {
		<-ctx.Done()
	}
	fmt.Fprintln(e.stdout, "chunkfs dev: stopping")
	if err := c.Close(); err != nil {
		return err
	}
	return mountErr
}

// serveDevMount mounts the dev cluster on dir and serves it until ctx ends
// (then unmounts); a mount that fails ends the dev cluster with its error.
func serveDevMount(ctx context.Context, e *env, c *cluster.Cluster, dir string) error {
	o := mountOptions{master: c.MasterAddr(), dir: dir, fuse: fusefs.DefaultConfig(), security: c.MountSecurity()}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := serveMount(ctx, o, log); err != nil {
		return fmt.Errorf("mount %s: %w", dir, err)
	}
	return nil
}

func printDevBanner(e *env, c *cluster.Cluster, dir string) {
	w := e.stdout
	if c.Masters() > 1 {
		fmt.Fprintf(w, "chunkfs dev: a group of %d masters, %d chunkservers, data in %s\n", c.Masters(), c.Chunkservers(), dir)
		for i := range c.Masters() {
			fmt.Fprintf(w, "  master %s on %s\n", c.GroupMemberName(i), c.GroupMasterAddr(i))
		}
	} else {
		fmt.Fprintf(w, "chunkfs dev: master on %s, %d chunkservers, data in %s\n", c.MasterAddr(), c.Chunkservers(), dir)
	}
	for i := range c.Chunkservers() {
		fmt.Fprintf(w, "  chunkserver %d on %s\n", i, c.ChunkserverAddr(i))
	}
	exports := []string{"CHUNKFS_INSECURE=1"}
	if c.Security().IsInsecure() {
		fmt.Fprintf(w, "\nInsecure: plain TCP, no TLS, no certificates (chunkfs dev --tls for mutual TLS).\n")
	} else {
		fmt.Fprintf(w, "\nMutual TLS: a new CA and certificates in %s.\n", filepath.Dir(c.TLSDir("root")))
		exports = []string{"CHUNKFS_TLS_DIR=" + c.TLSDir("root")}
	}
	master := ""
	if c.MasterAddr() != defaultMaster {
		master = " --master " + c.MasterAddr()
		exports = append([]string{"CHUNKFS_MASTER=" + c.MasterAddr()}, exports...)
		if c.Masters() > 1 {
			master = "" // the list is long: the commands below take it from CHUNKFS_MASTER
		}
	}
	fmt.Fprintf(w, "In another terminal: export %s\n", strings.Join(exports, " "))
	fmt.Fprintf(w, "\nThen, in that terminal:\n  chunkfs%s mkdir -p /demo\n  chunkfs%s put /etc/hosts /demo/\n  chunkfs%s ls -l /demo\n  chunkfs%s cat /demo/hosts\n  chunkfs%s admin report\n",
		master, master, master, master, master)
	fmt.Fprintln(w, "\nCtrl-C stops the cluster; running this again on the same directory keeps the data.")
}

// nextFreePorts returns, for n chunkservers, the ports after the master's
// (7071, 7072, 7073 for a master on 7070) where they are free now, so the
// cluster keeps its addresses across restarts; "" (any port) otherwise.
func nextFreePorts(master string, n int) []string {
	host, port, err := net.SplitHostPort(master)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p == 0 {
		return nil
	}
	addrs := make([]string, n)
	for i := range addrs {
		a := net.JoinHostPort(host, strconv.Itoa(p+1+i))
		if ln, err := net.Listen("tcp", a); err == nil {
			ln.Close()
			addrs[i] = a
		}
	}
	return addrs
}
