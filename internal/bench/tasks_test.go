package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/chunkfstest"
)

// runTask sets up and runs t as a worker would.
func runTask(t *testing.T, ctx context.Context, task Task) Result {
	t.Helper()
	if err := task.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := setupTask(ctx, task)
	if err != nil {
		t.Fatalf("%s: set-up: %v", task.Op, err)
	}
	res, err := r.run(ctx)
	if cerr := r.close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("%s: %v", task.Op, err)
	}
	return res
}

// TestTasksOnCluster runs the tasks built on the public client API against
// an in-process cluster of 1 MiB chunks: the wait sees the chunkservers,
// the appends report the chunks their records landed in, the locate task
// finds those chunks' replicas, and the probe times every step, its
// one- and two-replica files holding as many replicas.
func TestTasksOnCluster(t *testing.T) {
	tc := chunkfstest.NewCluster(t, chunkfstest.ChunkSize(MiB), chunkfstest.Chunkservers(3))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := tc.MasterAddr()

	if res := runTask(t, ctx, Task{Op: OpWait, Master: m, Servers: 3}); res.Ops < 1 {
		t.Errorf("wait: %d polls", res.Ops)
	}

	const record, total = 128 << 10, 3 * MiB
	app := runTask(t, ctx, Task{Op: OpAppend, Master: m, Path: "/a/log", IOSize: record, Bytes: total})
	var landed int64
	for _, b := range app.ChunkBytes {
		landed += b
	}
	if landed != total || len(app.ChunkBytes) < 3 {
		t.Errorf("appends landed %d bytes in chunks %v, want %d bytes over 3 chunks at least", landed, app.ChunkBytes, total)
	}
	if len(app.Events) == 0 || app.Events[0].What != "append: attempt" {
		t.Errorf("append events %+v, want the attempts", app.Events)
	}

	loc := runTask(t, ctx, Task{Op: OpLocate, Master: m, Files: []string{"/a/log"}, PerChunk: true})
	if loc.Placement == nil || len(loc.Placement.ByChunk) != loc.Placement.Chunks {
		t.Fatalf("placement %+v, want every chunk listed", loc.Placement)
	}
	received, err := receivedBytes(app.ChunkBytes, loc.Placement.ByChunk)
	if err != nil || len(received) != 3 {
		t.Fatalf("received %v, %v; want the three servers", received, err)
	}

	const op = 128 << 10
	probe := runTask(t, ctx, Task{Op: OpProbe, Master: m, Path: "/p/file", IOSize: op, Bytes: 3 * op})
	for _, ph := range []string{phasePrepare, phasePush1, phasePush2, phaseReserve, phasePush, phaseWrite, phaseAppend, phaseCommit} {
		if v, ok := probe.PhasesMS[ph]; !ok || v < 0 {
			t.Errorf("probe phase %q: %v, %v", ph, v, ok)
		}
	}
	if r, err := setupTask(ctx, Task{Op: OpProbe, Master: m, Path: "/p/big", IOSize: MiB, Bytes: MiB}); err == nil || !strings.Contains(err.Error(), "cannot be framed records") {
		if r != nil {
			r.close()
		}
		t.Errorf("a probe of 1 MiB records on 1 MiB chunks: %v, want refused", err)
	}
	c := tc.Client()
	for file, want := range map[string]int{"/p/file.r1": 1, "/p/file.r2": 2, "/p/file": 3} {
		chunks, err := c.Chunks(ctx, file)
		if err != nil || len(chunks) == 0 || len(chunks[0].Replicas) != want {
			t.Errorf("%s: chunks %+v, %v; want %d replicas", file, chunks, err, want)
		}
	}
}
