// Package chunkfstest starts a throwaway chunkfs cluster inside the test
// process, as net/http/httptest does for HTTP servers: a master and three
// chunkservers on 127.0.0.1, on a temporary directory, stopped and removed
// when the test ends.
//
//	func TestMyJob(t *testing.T) {
//		c := chunkfstest.NewCluster(t, chunkfstest.ChunkSize(256<<10))
//		ctx := context.Background()
//		fs := c.Client()
//		f, err := fs.Create(ctx, "/out")
//		...
//	}
//
// Small chunks make a test cross chunk boundaries with little data.
package chunkfstest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/cluster"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// Option changes how NewCluster starts the cluster.
type Option func(*cluster.Config)

// ChunkSize sets the chunk size (a multiple of 64 KiB; default 1 MiB).
func ChunkSize(n int64) Option { return func(c *cluster.Config) { c.ChunkSize = n } }

// Chunkservers sets the number of chunkservers (default 3).
func Chunkservers(n int) Option {
	return func(c *cluster.Config) {
		c.Chunkservers = n
		c.Replication = min(c.Replication, n)
	}
}

// Replication sets the default replication (default 3, at most the number
// of chunkservers).
func Replication(n int) Option { return func(c *cluster.Config) { c.Replication = n } }

// TrashPeriod keeps deleted files in the master's trash for d, from which
// Client.Undelete brings them back (default 0: deleting deletes at once).
func TrashPeriod(d time.Duration) Option { return func(c *cluster.Config) { c.TrashPeriod = d } }

// TLS runs the cluster with mutual TLS on every connection: a CA and
// certificates are made in its directory, and its clients present a
// superuser client certificate (Security).
func TLS() Option { return func(c *cluster.Config) { c.TLS = true } }

// Cluster is a running test cluster.
type Cluster struct {
	c      *cluster.Cluster
	client *client.Client
	dir    string // removed by Close when Start made it
}

// NewCluster starts a cluster for the test; t.Cleanup stops it and removes
// its data. It fails the test if the cluster cannot start.
func NewCluster(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	tc, err := start(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("chunkfstest: %v", err)
	}
	t.Cleanup(func() {
		if err := tc.Close(); err != nil {
			t.Errorf("chunkfstest: stopping the cluster: %v", err)
		}
	})
	return tc
}

// Start starts a cluster outside a test (in an example or TestMain) on a
// temporary directory. Close stops it and removes the directory.
func Start(opts ...Option) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "chunkfstest")
	if err != nil {
		return nil, err
	}
	tc, err := start(dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	tc.dir = dir
	return tc, nil
}

func start(dir string, opts []Option) (*Cluster, error) {
	cfg := cluster.DefaultConfig()
	cfg.Dir = dir
	for _, o := range opts {
		o(&cfg)
	}
	c, err := cluster.Start(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting a cluster: %w", err)
	}
	tc := &Cluster{c: c}
	if tc.client, err = tc.NewClient(); err != nil {
		c.Close()
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return tc, nil
}

// Close stops the cluster (NewCluster's cleanup does it for a test).
func (tc *Cluster) Close() error {
	tc.client.Close()
	err := tc.c.Close()
	if tc.dir != "" {
		os.RemoveAll(tc.dir)
	}
	return err
}

// MasterAddr returns the master's host:port, for client.Dial or the CLI's
// --master flag.
func (tc *Cluster) MasterAddr() string { return tc.c.MasterAddr() }

// Security returns what a client of a TLS cluster (TLS) presents: a
// superuser client certificate; nil (plain TCP) on a plain cluster.
func (tc *Cluster) Security() *rpc.Security { return tc.c.Security() }

// TLSDir returns the directory of the superuser client's certificate, for
// the CLI's --tls-dir; "" on a plain cluster.
func (tc *Cluster) TLSDir() string { return tc.c.TLSDir("root") }

// ChunkSize returns the cluster's chunk size.
func (tc *Cluster) ChunkSize() int64 { return tc.c.ChunkSize() }

// Client returns the cluster's client, which acts as the superuser and is
// closed with the cluster.
func (tc *Cluster) Client() *client.Client { return tc.client }

// NewClient returns a new client of the cluster acting as the superuser,
// with a short retry budget so a test that breaks the cluster fails
// quickly. The caller closes it.
func (tc *Cluster) NewClient() (*client.Client, error) {
	return tc.NewClientAs(chunkfs.Root)
}

// NewClientAs is NewClient acting as caller (for permission tests).
func (tc *Cluster) NewClientAs(caller chunkfs.Caller) (*client.Client, error) {
	cfg := client.DefaultConfig()
	cfg.Master = tc.c.MasterAddr()
	cfg.Caller = caller
	cfg.Security = tc.c.Security()
	cfg.RetryTimeout = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return client.New(ctx, cfg)
}

// StopChunkserver stops chunkserver i (0-based) as a crash would.
func (tc *Cluster) StopChunkserver(i int) error { return tc.c.StopChunkserver(i) }

// RestartChunkserver restarts chunkserver i on its address and data.
func (tc *Cluster) RestartChunkserver(i int) error { return tc.c.RestartChunkserver(i) }

// RestartMaster restarts the master on its address and data.
func (tc *Cluster) RestartMaster() error { return tc.c.RestartMaster() }

// StopMaster stops the master, as a crash would (its data stays).
func (tc *Cluster) StopMaster() error { return tc.c.StopMaster() }

// StartMaster starts the stopped master again on its address and data.
func (tc *Cluster) StartMaster() error { return tc.c.StartMaster() }

// CorruptReplica flips the byte at off in chunkserver i's replica of chunk h.
func (tc *Cluster) CorruptReplica(i int, h chunkfs.Handle, off int64) error {
	return tc.c.CorruptReplica(i, h, off)
}

// HasReplica reports whether chunkserver i's data directory holds a
// replica of chunk h.
func (tc *Cluster) HasReplica(i int, h chunkfs.Handle) bool { return tc.c.HasReplica(i, h) }

// ChunkserverAddr returns chunkserver i's address.
func (tc *Cluster) ChunkserverAddr(i int) string { return tc.c.ChunkserverAddr(i) }

// Chunkservers returns the number of chunkservers.
func (tc *Cluster) Chunkservers() int { return tc.c.Chunkservers() }

// WaitAlive waits until the master sees n live chunkservers.
func (tc *Cluster) WaitAlive(ctx context.Context, n int) error { return tc.c.WaitAlive(ctx, n) }
