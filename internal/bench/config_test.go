package bench

import (
	"slices"
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

// The headlines run on the paper's 64 MiB chunks; the writes' 1 MiB chunks
// are a labelled variant, run last, and none when WriteChunkSize is 0 or
// the headline's.
func TestPanels(t *testing.T) {
	c := DefaultConfig()
	want := []Panel{{Reads, chunkfs.DefaultChunkSize, false}, {Writes, chunkfs.DefaultChunkSize, false},
		{Appends, chunkfs.DefaultChunkSize, false}, {Writes, MiB, true}}
	if got := c.panels(); !slices.Equal(got, want) {
		t.Errorf("panels %+v, want %+v", got, want)
	}
	for _, v := range []int64{0, chunkfs.DefaultChunkSize} {
		c.WriteChunkSize = v
		if got := c.panels(); len(got) != 3 || got[1] != (Panel{Writes, chunkfs.DefaultChunkSize, false}) {
			t.Errorf("WriteChunkSize %d: panels %+v, want the three headlines", v, got)
		}
	}
	c.WriteChunkSize, c.ChunkSize, c.Workloads = MiB, 8*MiB, []Workload{Reads, Appends}
	if got := c.panels(); len(got) != 2 || got[0].ChunkSize != 8*MiB {
		t.Errorf("no writes: panels %+v, want reads and appends on 8 MiB chunks", got)
	}
}
