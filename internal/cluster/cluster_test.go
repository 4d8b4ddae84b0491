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
