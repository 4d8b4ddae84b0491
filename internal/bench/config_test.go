package bench

import (
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Binary, good.WorkerArgv = "/bin/chunkfs", []string{"/bin/chunkfs", "bench-worker"}
	if err := good.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Clients = []int{0} },
		func(c *Config) { c.Clients = []int{17} },
		func(c *Config) { c.ReadSetFileSize = c.ReadSize - 1 },
		func(c *Config) { c.ChunkSize = 100 << 10 },                             // not a multiple of 64 KiB
		func(c *Config) { c.WriteChunkSize = -64 << 10 },                        // negative
		func(c *Config) { c.WriteChunkSize = 8 << 30 },                          // too large
		func(c *Config) { c.ChunkSize = 2 * MiB },                               // a 1 MiB record does not fit
		func(c *Config) { c.RecordSize = 16*MiB - client.RecordHeaderSize + 1 }, // nor does this one in 64 MiB
		func(c *Config) { c.Binary = "" },
	}
	for i, mutate := range bad {
		c := good
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("case %d: invalid config accepted", i)
		}
	}
	// Records are checked against the appends' chunks only.
	c := good
	c.ChunkSize, c.Workloads = 2*MiB, []Workload{Reads, Writes}
	if err := c.Validate(); err != nil {
		t.Errorf("2 MiB chunks without appends: %v", err)
	}
}

func TestChunkSizeOfWorkload(t *testing.T) {
	c := DefaultConfig()
	if got := c.chunkSize(Writes); got != MiB {
		t.Errorf("writes run on %d-byte chunks, want 1 MiB", got)
	}
	if c.chunkSize(Reads) != chunkfs.DefaultChunkSize || c.chunkSize(Appends) != chunkfs.DefaultChunkSize {
		t.Errorf("reads and appends run on %d- and %d-byte chunks, want the default 64 MiB", c.chunkSize(Reads), c.chunkSize(Appends))
	}
	c.WriteChunkSize, c.ChunkSize = 0, 8*MiB
	if got := c.chunkSize(Writes); got != 8*MiB {
		t.Errorf("WriteChunkSize 0: writes run on %d-byte chunks, want ChunkSize's 8 MiB", got)
	}
}
