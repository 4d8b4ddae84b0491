// Package cluster runs a whole chunkfs cluster inside one process for tests:
// a master and N chunkservers on 127.0.0.1 random ports, each on its own
// data directory, with fault injection (stop, restart, corrupt a replica,
// restart the master). Package chunkfstest wraps it for users; nothing
// outside tests and `chunkfs dev` imports it.
//
// Start runs the servers of a Config and returns once the master sees
// every chunkserver; the Cluster's methods inject faults and wait for
// their effects, and Close stops everything.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/chunkstore"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/loopback"
	"github.com/chunkfs/chunkfs/internal/master"
)

// Config describes a cluster to start.
type Config struct {
	Dir          string        // data directory; each server gets a subdirectory
	Chunkservers int           // number of chunkservers
	ChunkSize    int64         // chunk size in bytes
	Replication  int           // default replication
	Heartbeat    time.Duration // chunkserver heartbeat interval
	DeadAfter    time.Duration // a chunkserver silent this long is dead
	Lease        time.Duration // lease duration
	MasterAddr   string        // master listen address; "" picks a free port on 127.0.0.1
	// ChunkserverAddrs optionally gives chunkserver i's listen address; a
	// missing or empty entry picks a free port on 127.0.0.1.
	ChunkserverAddrs []string
	Logger           *slog.Logger
	// Master, when set, adjusts the master's configuration before each
	// start (tests: minimum replicas, clone hooks, clocks).
	Master func(*master.Config)
	// Chunkserver, when set, adjusts chunkserver i's configuration before
	// each start (tests: mutation hooks).
	Chunkserver func(i int, cfg *chunkserver.Config)
	// Masters, when more than one, starts a highly available group of
	// that many voting masters, and Observers observers beside them
	// (group.go); MasterAddr then lists them all.
	Masters   int
	Observers int
	// GroupAddrs optionally gives group master i's address (voters, then
	// observers); a missing or empty entry picks a free port on 127.0.0.1.
	GroupAddrs []string
	// TLS runs mutual TLS on every connection, with a CA and certificates
	// made under Dir/tls (tls.go); clients use Security().
	TLS bool
	// Capacity, when set, is the size (bytes) each chunkserver reports for
	// its data directory, as if each had a disk of its own that size
	// (tests of utilisation: the real servers share one disk).
	Capacity int64
	// Tokens turns chunk access tokens on: the masters sign them, the
	// chunkservers require them. TokenClock, when set, is the clock of
	// token keys and tokens in every server (tests advance it past
	// rotations); nil: the real clock.
	Tokens     bool
	TokenClock clock.Clock
	// TrashPeriod is the masters' grace period for deleted files; 0 (the
	// default here, unlike a master's) deletes at once, so that tests
	// see space reclaimed when they delete.
	TrashPeriod time.Duration
}

// DefaultConfig is a small test cluster: 3 chunkservers, 1 MiB chunks, fast
// heartbeats so failures are noticed within a second.
func DefaultConfig() Config {
	return Config{
		Chunkservers: 3,
		ChunkSize:    1 << 20,
		Replication:  3,
		Heartbeat:    100 * time.Millisecond,
		DeadAfter:    time.Second,
		Lease:        2 * time.Second,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("cluster: Dir is empty")
	case c.Chunkservers < 1 || c.Chunkservers > 64:
		return fmt.Errorf("cluster: %d chunkservers not in [1, 64]", c.Chunkservers)
	case c.ChunkSize < chunkfs.BlockSize || c.ChunkSize%chunkfs.BlockSize != 0:
		return fmt.Errorf("cluster: chunk size %d is not a multiple of %d", c.ChunkSize, chunkfs.BlockSize)
	case c.Replication < 1 || c.Replication > c.Chunkservers:
		return fmt.Errorf("cluster: replication %d not in [1, %d]", c.Replication, c.Chunkservers)
	case c.Heartbeat <= 0 || c.DeadAfter <= c.Heartbeat || c.Lease <= 0:
		return errors.New("cluster: Heartbeat, DeadAfter and Lease must be positive, DeadAfter > Heartbeat")
	}
	return nil
}

// Cluster is a running in-process cluster.
type Cluster struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex // guards master, group, servers and closed
	master *node      // the master alone; nil in a group
	group  []*node    // a group's masters: voters, then observers
	cs     []*node
	closed bool
	pki    *pki // nil: plain TCP
}

// node is one server: its address survives restarts.
type node struct {
	addr  string
	dir   string
	close func() error // nil when stopped
	done  chan error   // Serve's result
	m     *master.Master
	cs    *chunkserver.Server // a chunkserver's, while it runs (figures.go)
	gate  *raftGate           // a group master's Raft input (lag.go)
}

// Start starts a master and cfg.Chunkservers chunkservers and waits until the
// master knows every chunkserver.
func Start(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(discard{}, nil))
	}
	if cfg.TLS {
		var err error
		if c.pki, err = newPKI(filepath.Join(cfg.Dir, "tls")); err != nil {
			return nil, err
		}
	}
	if cfg.Masters > 1 || cfg.Observers > 0 {
		if err := c.startGroup(); err != nil {
			return nil, err
		}
	} else {
		c.master = &node{addr: cfg.MasterAddr, dir: filepath.Join(cfg.Dir, "master")}
		if err := c.startMaster(); err != nil {
			return nil, err
		}
	}
	for i := range cfg.Chunkservers {
		n := &node{dir: filepath.Join(cfg.Dir, fmt.Sprintf("cs%d", i))}
		if i < len(cfg.ChunkserverAddrs) {
			n.addr = cfg.ChunkserverAddrs[i]
		}
		c.cs = append(c.cs, n)
		if err := c.startChunkserver(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitAlive(ctx, cfg.Chunkservers); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// listen opens addr, or a free port of internal/loopback when addr is
// empty, and records the address for restarts.
func listen(n *node) (net.Listener, error) {
	if n.addr == "" {
		ln, err := loopback.Listen()
		if err == nil {
			n.addr = ln.Addr().String()
		}
		return ln, err
	}
	addr := n.addr
	var ln net.Listener
	var err error
	for range 50 { // a restarted server's port may take a moment to free
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	n.addr = ln.Addr().String()
	return ln, nil
}

func (c *Cluster) startMaster() error {
	ln, err := listen(c.master)
	if err != nil {
		return err
	}
	m, err := master.Open(c.masterConfig(c.master.dir, c.log.With("role", "master"), nil))
	if err != nil {
		ln.Close()
		return err
	}
	c.master.close, c.master.m = m.Close, m
	if c.pki == nil {
		c.master.done = serve(func() error { return m.Serve(ln) })
		return nil
	}
	// As `chunkfs master` does: TLS is terminated by a Mux, which tells
	// plain-TCP clients that the server requires TLS.
	mux := c.masterSecurity().NewMux(ln, c.log)
	go mux.Serve()
	c.master.close = func() error {
		err := m.Close()
		mux.Close()
		return err
	}
	c.master.done = serve(func() error { return m.Serve(mux.GRPC()) })
	return nil
}

// masterConfig is a master's configuration in this cluster; group, when
// set, makes it one of a group.
func (c *Cluster) masterConfig(dir string, log *slog.Logger, group func(*master.Config)) master.Config {
	mc := master.DefaultConfig()
	mc.Dir = dir
	mc.ChunkSize = c.cfg.ChunkSize
	mc.DefaultReplication = c.cfg.Replication
	mc.LeaseDuration = c.cfg.Lease
	mc.HeartbeatInterval = c.cfg.Heartbeat
	mc.DeadAfter = c.cfg.DeadAfter
	mc.RepairInterval = c.cfg.Heartbeat
	mc.Logger = log
	mc.Security = c.masterSecurity()
	mc.Tokens, mc.TokenClock = c.cfg.Tokens, c.cfg.TokenClock
	mc.TrashPeriod = c.cfg.TrashPeriod
	if group != nil {
		group(&mc)
	}
	if c.cfg.Master != nil {
		c.cfg.Master(&mc)
	}
	return mc
}

func (c *Cluster) startChunkserver(i int) error {
	n := c.cs[i]
	ln, err := listen(n)
	if err != nil {
		return err
	}
	sc := chunkserver.DefaultConfig()
	sc.Dirs = []string{n.dir}
	sc.Masters = c.masterAddrs()
	sc.Rack = fmt.Sprintf("rack%d", i%3)
	sc.Addr = n.addr
	sc.HeartbeatInterval = c.cfg.Heartbeat
	sc.RequireTokens, sc.TokenClock = c.cfg.Tokens, c.cfg.TokenClock
	sc.Logger = c.log.With("role", "chunkserver", "i", i)
	sc.Security = c.chunkserverSecurity()
	if c.cfg.Capacity > 0 {
		sc.FS = sizedFS{FS: sc.FS, size: c.cfg.Capacity}
		sc.Reserve = 0
	}
	if c.cfg.Chunkserver != nil {
		c.cfg.Chunkserver(i, &sc)
	}
	s, err := chunkserver.Open(sc)
	if err != nil {
		ln.Close()
		return err
	}
	n.close, n.cs = s.Close, s
	n.done = serve(func() error { return s.Serve(ln) })
	return nil
}

func serve(fn func() error) chan error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	return done
}

// MasterAddr returns the master's address; in a group, every master's,
// comma-separated, as clients take them.
func (c *Cluster) MasterAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.masterAddrs(), ",")
}

// masterAddrs returns the masters' addresses; it needs c.mu, under which
// a restart records them again (listen).
func (c *Cluster) masterAddrs() []string {
	if c.master != nil {
		return []string{c.master.addr}
	}
	addrs := make([]string, len(c.group))
	for i, n := range c.group {
		addrs[i] = n.addr
	}
	return addrs
}

// ChunkSize returns the cluster's chunk size.
func (c *Cluster) ChunkSize() int64 { return c.cfg.ChunkSize }

// ChunkserverAddr returns chunkserver i's address.
func (c *Cluster) ChunkserverAddr(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cs[i].addr
}

// Chunkservers returns the number of chunkservers.
func (c *Cluster) Chunkservers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cs)
}

// stop closes a node and waits for Serve to return.
func stop(n *node) error {
	if n.close == nil {
		return nil
	}
	err := n.close()
	n.close = nil
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		return errors.New("cluster: server did not stop within 10s")
	}
	return err
}

// AddChunkserver starts a new, empty chunkserver and returns its index;
// the master learns of it at its registration.
func (c *Cluster) AddChunkserver() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := len(c.cs)
	c.cs = append(c.cs, &node{dir: filepath.Join(c.cfg.Dir, fmt.Sprintf("cs%d", i))})
	if err := c.startChunkserver(i); err != nil {
		return -1, err
	}
	return i, nil
}

// sizedFS reports every data directory as a disk of its own of a given
// size, with what the store holds under it used (Cluster.Config.Capacity).
type sizedFS struct {
	chunkstore.FS
	size int64
}

func (f sizedFS) Space(dir string) (chunkstore.Disk, error) {
	d, err := f.FS.Space(dir)
	if err != nil {
		return d, err
	}
	var used int64
	filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if info, err := e.Info(); err == nil {
				used += info.Size()
			}
		}
		return nil
	})
	return chunkstore.Disk{ID: "sized:" + dir, Total: f.size, Free: max(min(d.Free, f.size-used), 0)}, nil
}

// StopChunkserver stops chunkserver i, as a crash would (its data directory
// stays).
func (c *Cluster) StopChunkserver(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return stop(c.cs[i])
}

// RestartChunkserver starts chunkserver i again on the same address and
// data directory, stopping it first if it runs.
func (c *Cluster) RestartChunkserver(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := stop(c.cs[i]); err != nil {
		return err
	}
	return c.startChunkserver(i)
}

// RestartMaster stops the master and starts it again on the same address
// and data directory.
func (c *Cluster) RestartMaster() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.master == nil {
		return errors.New("cluster: RestartMaster of a group; use RestartGroupMaster")
	}
	if err := stop(c.master); err != nil {
		return err
	}
	return c.startMaster()
}

// StopMaster stops the master, as a crash would (its data directory
// stays); StartMaster starts it again.
func (c *Cluster) StopMaster() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.master == nil {
		return errors.New("cluster: StopMaster of a group")
	}
	return stop(c.master)
}

// StartMaster starts the master StopMaster stopped, on the same address
// and data directory.
func (c *Cluster) StartMaster() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.master == nil || c.master.close != nil {
		return errors.New("cluster: StartMaster of a group or of a running master")
	}
	return c.startMaster()
}

// CorruptReplica flips one byte, at offset off of the chunk's data, in the
// replica of chunk h held by chunkserver i. It returns an error when that
// chunkserver holds no such replica or the replica is shorter than off+1.
func (c *Cluster) CorruptReplica(i int, h chunkfs.Handle, off int64) error {
	c.mu.Lock()
	dir := c.cs[i].dir
	c.mu.Unlock()
	file, err := findChunkFile(dir, h)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return fmt.Errorf("cluster: reading byte %d of %s: %w", off, file, err)
	}
	b[0] ^= 0xFF
	if _, err := f.WriteAt(b[:], off); err != nil {
		return err
	}
	return f.Sync()
}

// RemoveReplica deletes chunk h's files (data and metadata) from
// chunkserver i's data directory, as a lost disk would; stop the
// chunkserver first, or it still serves what it has open.
func (c *Cluster) RemoveReplica(i int, h chunkfs.Handle) error {
	c.mu.Lock()
	dir := c.cs[i].dir
	c.mu.Unlock()
	file, err := findChunkFile(dir, h)
	if err != nil {
		return err
	}
	if err := os.Remove(strings.TrimSuffix(file, ".data") + ".meta"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Remove(file)
}

// HasReplica reports whether chunkserver i's data directory holds chunk h.
func (c *Cluster) HasReplica(i int, h chunkfs.Handle) bool {
	c.mu.Lock()
	dir := c.cs[i].dir
	c.mu.Unlock()
	_, err := findChunkFile(dir, h)
	return err == nil
}

// findChunkFile finds the data file of chunk h under dir. Chunk files are
// named by handle in hexadecimal with the suffix ".data" (internal/chunkstore).
func findChunkFile(dir string, h chunkfs.Handle) (string, error) {
	want := fmt.Sprintf("%016x.data", uint64(h))
	var found string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.EqualFold(d.Name(), want) {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if found == "" {
		return "", fmt.Errorf("cluster: no replica of chunk %016x under %s", uint64(h), dir)
	}
	return found, nil
}

// Close stops every server. The data directory stays.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, n := range c.cs {
		errs = append(errs, stop(n))
	}
	if c.master != nil {
		errs = append(errs, stop(c.master))
	}
	for _, n := range c.group {
		errs = append(errs, stop(n))
	}
	return errors.Join(errs...)
}
