package cluster

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/chunkserver"
)

// TestMutationsGoOnPastAFullReplica: the disk of one replica (a
// secondary's or the primary's) of the chunk being appended to, or written
// at its end, fills up; the replica stays good, as only growth fails.
// None of the mutations that follow fails, and only the first is retried:
// the writer names the primary after the no-space answer, the master's
// probe finds the replica that ran out of space and takes it out of the
// chunk's replica set at a new version (its server full to the master from
// then on), and the mutations go on on the other two; the chunk is healed
// on the fourth server, which has room.
func TestMutationsGoOnPastAFullReplica(t *testing.T) {
	for _, tc := range []struct {
		op      string
		primary bool // the primary's disk fills up, not a secondary's
	}{{"append", false}, {"write", false}, {"append", true}} {
		name := tc.op + map[bool]string{true: "/primary", false: "/secondary"}[tc.primary]
		t.Run(name, func(t *testing.T) { testPastAFullReplica(t, tc.op, tc.primary) })
	}
}

func testPastAFullReplica(t *testing.T, op string, primary bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := make([]atomic.Bool, 4)
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.Chunkservers = 4
	cfg.Lease = 3 * time.Second // extended while the mutations run: it must be moved
	cfg.Chunkserver = func(i int, sc *chunkserver.Config) { sc.FS = fillableFS{FS: sc.FS, full: &full[i], growOnly: true} }
	c, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var noSpace atomic.Int64
	ccfg := client.DefaultConfig()
	ccfg.Master, ccfg.Caller, ccfg.Security = c.MasterAddr(), chunkfs.Root, c.Security()
	ccfg.Trace = &client.Trace{Retry: func(r client.Retry) {
		if chunkfs.KindOf(r.Err) == chunkfs.KindNoSpace {
			noSpace.Add(1)
		}
	}}
	cl, err := client.New(ctx, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	f, err := cl.Create(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	record := healBytes(3, 10_000)
	mutate := func() error {
		if op == "append" {
			_, err := f.Append(record)
			return err
		}
		if _, err := f.Write(record); err != nil {
			return err
		}
		return f.Sync()
	}
	if err := mutate(); err != nil {
		t.Fatal(err)
	}
	before, err := cl.Chunks(ctx, "/f")
	if err != nil || len(before) != 1 || len(before[0].Replicas) != 3 {
		t.Fatalf("chunks %+v, %v; want one chunk on 3 replicas", before, err)
	}
	fullAddr := ""
	for i, a := range addrs(c) {
		if (a == before[0].Primary) == primary && slices.Contains(before[0].Replicas, a) {
			full[i].Store(true)
			fullAddr = a
			break
		}
	}
	const n = 20
	failed := 0
	for range n {
		if err := mutate(); err != nil {
			failed++
			t.Logf("%s: %v", op, err)
		}
	}
	t.Logf("%d of %d %ss failed; %d retries after no space", failed, n, op, noSpace.Load())
	if failed > 0 || noSpace.Load() > 1 {
		t.Errorf("%d of %d %ss failed, %d retries after no space; want none failed and at most 1 retry", failed, n, op, noSpace.Load())
	}
	after, err := cl.Chunks(ctx, "/f")
	if err != nil || slices.Contains(after[0].Replicas, fullAddr) || after[0].Version <= before[0].Version {
		t.Errorf("after the %ss: %+v, %v; want the full replica out, at a new version", op, after, err)
	}
	waitHealed(t, ctx, cl)
}
