package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// TestAdoptedLeaseFencesUnregisteredReplica: a master restarts while one
// secondary of a log's chunk is down; the primary reports its lease and
// the new master adopts it. The appends that follow must not run at the
// old version on the replicas counted so far: the secondary, when it
// comes back still at that version, would be counted as current while
// it lacks them, and reads from it would skip acknowledged records.
// Every replica the master lists at the end holds every acknowledged
// record.
func TestAdoptedLeaseFencesUnregisteredReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Lease = 10 * time.Second // the adopted lease outlives the restart
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := newDefaultClient(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f, err := cl.Create(ctx, "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	record := func(i int) []byte { return []byte(fmt.Sprintf("record %04d %s", i, bytes.Repeat([]byte{'x'}, 500))) }
	var acked []int
	appendN := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := f.Append(record(i)); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
			acked = append(acked, i)
		}
	}
	appendN(0, 20)
	chunks, err := cl.Chunks(ctx, "/log")
	if err != nil || len(chunks) != 1 || len(chunks[0].Replicas) != 3 {
		t.Fatalf("chunks %+v, %v; want one chunk on 3 replicas", chunks, err)
	}
	secondary := -1
	for i := range c.Chunkservers() {
		a := c.ChunkserverAddr(i)
		if a != chunks[0].Primary && slices.Contains(chunks[0].Replicas, a) {
			secondary = i
			break
		}
	}
	if secondary < 0 {
		t.Fatalf("no secondary in %+v", chunks[0])
	}
	if err := c.StopChunkserver(secondary); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartMaster(); err != nil {
		t.Fatal(err)
	}
	appendN(20, 60) // under the adopted lease, or a new one
	if err := c.RestartChunkserver(secondary); err != nil {
		t.Fatal(err)
	}
	// The secondary registers; it is stale (fenced) and replaced, or was
	// never left behind. Either way the chunk is back at 3 replicas.
	deadline := time.Now().Add(time.Minute)
	for {
		chunks, err = cl.Chunks(ctx, "/log")
		if err == nil && len(chunks) == 1 && len(chunks[0].Replicas) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chunk not back at 3 replicas: %+v, %v", chunks, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dc := rpc.NewDataClient()
	defer dc.Close()
	for _, addr := range chunks[0].Replicas {
		buf := make([]byte, cfg.ChunkSize)
		n, err := dc.Read(ctx, addr, chunkfs.Handle(chunks[0].Handle), chunkfs.Version(chunks[0].Version), 0, buf)
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("replica %s: %v", addr, err)
		}
		got := map[string]bool{}
		rr := client.NewRecordReader(bytes.NewReader(buf[:n]), 0)
		for {
			rec, err := rr.Next()
			if err != nil {
				break
			}
			got[string(rec.Data)] = true
		}
		var missing []int
		for _, i := range acked {
			if !got[string(record(i))] {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 {
			t.Errorf("replica %s (cs%d) at version %d lacks %d acknowledged records: %v", addr, slices.Index(addrs(c), addr), chunks[0].Version, len(missing), missing)
		}
	}
}

func addrs(c *Cluster) []string {
	out := make([]string, c.Chunkservers())
	for i := range out {
		out[i] = c.ChunkserverAddr(i)
	}
	return out
}
