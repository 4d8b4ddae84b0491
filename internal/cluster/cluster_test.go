package cluster

import (
	"context"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	good := DefaultConfig()
	good.Dir = t.TempDir()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for i, mutate := range []func(*Config){
		func(c *Config) { c.Dir = "" },
		func(c *Config) { c.Chunkservers = 0 },
		func(c *Config) { c.ChunkSize = 1000 },
		func(c *Config) { c.Replication = 4 },
		func(c *Config) { c.DeadAfter = c.Heartbeat },
	} {
		c := good
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("bad config %d accepted", i)
		}
	}
}

func TestStopRestart(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ChunkserverAddr(2)
	if err := c.StopChunkserver(2); err != nil {
		t.Fatal(err)
	}
	if err := c.StopChunkserver(2); err != nil {
		t.Fatalf("stopping a stopped chunkserver: %v", err)
	}
	if err := c.RestartChunkserver(2); err != nil {
		t.Fatal(err)
	}
	if c.ChunkserverAddr(2) != addr {
		t.Fatalf("restarted on %s, was %s", c.ChunkserverAddr(2), addr)
	}
	if err := c.RestartMaster(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitAlive(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := c.CorruptReplica(0, 12345, 0); err == nil {
		t.Fatal("corrupting a replica that does not exist succeeded")
	}
	if c.HasReplica(0, 12345) {
		t.Fatal("HasReplica of an unknown chunk")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestAddressesReadDuringRestarts: the master's and the chunkservers'
// addresses, and WaitAlive, are read while they restart (as a test
// dialing new clients during a restart does). A restart records each
// address again under the cluster's lock; the readers take it too, or
// the race detector reports the read of a master's address here.
func TestAddressesReadDuringRestarts(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := c.MasterAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if got := c.MasterAddr(); got != want {
				t.Errorf("master address %q during a restart, was %q", got, want)
				return
			}
			c.ChunkserverAddr(0)
			wctx, wcancel := context.WithTimeout(ctx, 50*time.Millisecond)
			c.WaitAlive(wctx, 1) // fails while the master is down
			wcancel()
		}
	}()
	for range 2 {
		if err := c.RestartMaster(); err != nil {
			t.Fatal(err)
		}
		if err := c.RestartChunkserver(0); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	if err := c.WaitAlive(ctx, 3); err != nil {
		t.Fatal(err)
	}
}
