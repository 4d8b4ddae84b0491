package cluster

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

// The consistency HDFS-12943 promises to a client that reads from
// observers, checked with porcupine on recorded histories.
//
// Each client owns one register: a file whose permission bits hold a
// version, which only its owner sets (Chmod, through the leader), to 1, 2,
// 3, … in turn. Every client reads every register with Stat, which the
// client sends to an observer with its state ID, and sometimes with an
// msync first. The observer lags now and then (PauseRaft); midway, the
// leader is stopped.
//
// Two checks, each what the design promises and no more:
//   - sessionModel, over each client's own operations on one register:
//     a read returns at least the version the client last wrote
//     (read-your-writes) and at least the version it last read (monotonic
//     reads). That is the state-ID guarantee: an observer answers only once
//     it has applied the highest state the client has seen. Versions only
//     grow, so "at least" is the order of the log.
//   - registerModel, over every client's writes and msync'ed reads of one
//     register: linearizability. An msync adopts the leader's commit index,
//     so the read after it sees every write acknowledged before the msync
//     began. Reads without msync are left out: they may be stale, by design.

type regInput struct {
	write   bool
	version int
}

// sessionModel is one client's view of one register: the state is the
// lowest version its next read may return.
var sessionModel = porcupine.Model{
	Init: func() any { return 0 },
	Step: func(state, input, output any) (bool, any) {
		floor, in := state.(int), input.(regInput)
		if in.write {
			return true, max(floor, in.version)
		}
		got := output.(int)
		return got >= floor, got
	},
	DescribeOperation: describeReg,
}

// registerModel is a linearizable register.
var registerModel = porcupine.Model{
	Init: func() any { return 0 },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		if in.write {
			return true, in.version
		}
		return output.(int) == state.(int), state
	},
	DescribeOperation: describeReg,
}

func describeReg(input, output any) string {
	if in := input.(regInput); in.write {
		return fmt.Sprintf("write %d", in.version)
	}
	return fmt.Sprintf("read %v", output)
}

// regOp is one recorded operation.
type regOp struct {
	client, key int
	synced      bool // a read after an msync
	op          porcupine.Operation
}

func TestObserverReadsAcrossFailoverPorcupine(t *testing.T) {
	c, admin, ctx := startGroupCluster(t)
	const clients, opsEach = 4, 60
	keys := make([]string, clients)
	for k := range keys {
		keys[k] = fmt.Sprintf("/reg-%d", k)
		put(t, ctx, admin, keys[k], nil)
		if err := admin.Chmod(ctx, keys[k], 0); err != nil {
			t.Fatal(err)
		}
	}
	cls := make([]*client.Client, clients)
	for i := range cls {
		cfg := client.DefaultConfig()
		cfg.Master, cfg.Caller = c.MasterAddr(), chunkfs.Root
		cl, err := client.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		cls[i] = cl
	}

	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	const ambiguous = int64(1) << 62 // the Return of a write whose outcome is unknown
	var (
		mu      sync.Mutex // guards ops and failed
		ops     []regOp
		failed  []string
		halfway = make(chan struct{}, clients)
		resume  = make(chan struct{})
	)
	var wg sync.WaitGroup
	for i, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(i)))
			next := 1
			for n := range opsEach {
				if n == opsEach/2 {
					halfway <- struct{}{}
					<-resume
				}
				octx, cancel := context.WithTimeout(ctx, 30*time.Second)
				r := regOp{client: i}
				r.op.ClientId = i
				r.op.Call = now()
				var err error
				switch p := rng.Intn(6); {
				case p < 2:
					r.key, r.op.Input = i, regInput{write: true, version: next}
					err = cl.Chmod(octx, keys[i], fs.FileMode(next))
					next++
				default:
					r.key, r.synced = rng.Intn(clients), p == 5
					r.op.Input = regInput{}
					if r.synced {
						err = cl.Msync(octx)
					}
					var fi *chunkfs.FileInfo
					if err == nil {
						fi, err = cl.Stat(octx, keys[r.key])
					}
					if err == nil {
						r.op.Output = int(fi.Mode().Perm())
					}
				}
				r.op.Return = now()
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					ops = append(ops, r)
				case r.op.Input.(regInput).write:
					r.op.Return = ambiguous
					ops = append(ops, r)
					failed = append(failed, fmt.Sprintf("client %d: %v", i, err))
				default:
					failed = append(failed, fmt.Sprintf("client %d: %v", i, err))
				}
				mu.Unlock()
			}
		}()
	}
	// The observer lags now and then: its Raft input is held back for
	// 200 ms in every 400, so that reads through it would be stale but
	// for the state IDs.
	observer := c.Masters() - 1
	lagDone := make(chan struct{})
	go func() {
		defer c.PauseRaft(observer, false)
		for pause := true; ; pause = !pause {
			c.PauseRaft(observer, pause)
			select {
			case <-lagDone:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	for range clients {
		<-halfway
	}
	old := c.Leader()
	if err := c.StopGroupMaster(old); err != nil {
		t.Fatal(err)
	}
	close(resume) // the second half runs across the failover
	wg.Wait()
	close(lagDone)
	if next := c.Leader(); next < 0 || next == old {
		t.Fatalf("leader after stopping master %d: %d", old, next)
	}

	sessions := map[[2]int][]porcupine.Operation{}
	registers := map[int][]porcupine.Operation{}
	reads, synced := 0, 0
	for _, r := range ops {
		sessions[[2]int{r.client, r.key}] = append(sessions[[2]int{r.client, r.key}], r.op)
		if w := r.op.Input.(regInput).write; w || r.synced {
			registers[r.key] = append(registers[r.key], r.op)
		}
		if !r.op.Input.(regInput).write {
			reads++
			if r.synced {
				synced++
			}
		}
	}
	for k, h := range sessions {
		if res, info := porcupine.CheckOperationsVerbose(sessionModel, h, 10*time.Second); res != porcupine.Ok {
			t.Errorf("client %d on register %d: read-your-writes or monotonic reads broken (%s): %v", k[0], k[1], res, describeHistory(h, info))
		}
	}
	for k, h := range registers {
		if res := porcupine.CheckOperationsTimeout(registerModel, h, 10*time.Second); res != porcupine.Ok {
			t.Errorf("register %d: writes and msync'ed reads not linearizable (%s): %v", k, res, describeHistory(h, porcupine.LinearizationInfo{}))
		}
	}
	// Reads do fail over too; a write in flight at the stop may fail with
	// its outcome unknown (checked as either). Allow one per client.
	if len(failed) > clients {
		t.Errorf("%d operations failed: %v", len(failed), failed)
	}
	t.Logf("%d operations (%d reads, %d after msync, %d stale: older than a write of another client acknowledged before they began), %d failed, leader %d stopped midway",
		len(ops), reads, synced, staleReads(ops), len(failed), old)
}

// staleReads counts the reads that returned a version older than one
// acknowledged before they began: allowed for another client's write
// without msync, and a sign that the observer did lag.
func staleReads(ops []regOp) int {
	n := 0
	for _, r := range ops {
		if r.op.Input.(regInput).write {
			continue
		}
		for _, w := range ops {
			if in := w.op.Input.(regInput); in.write && w.key == r.key && w.op.Return < r.op.Call && in.version > r.op.Output.(int) {
				n++
				break
			}
		}
	}
	return n
}

func describeHistory(h []porcupine.Operation, _ porcupine.LinearizationInfo) []string {
	var out []string
	for _, op := range h {
		out = append(out, fmt.Sprintf("[%d %s %d..%d]", op.ClientId, describeReg(op.Input, op.Output), op.Call, op.Return))
	}
	return out
}

// The models reject what they are there to catch.
func TestConsistencyModelsRejectStaleReads(t *testing.T) {
	w := func(v int, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: regInput{write: true, version: v}, Call: call, Return: ret}
	}
	r := func(v int, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: regInput{}, Output: v, Call: call, Return: ret}
	}
	for _, tc := range []struct {
		name  string
		model porcupine.Model
		h     []porcupine.Operation
		ok    bool
	}{
		{"own write then older read", sessionModel, []porcupine.Operation{w(1, 0, 1), w(2, 2, 3), r(1, 4, 5)}, false},
		{"reads going backwards", sessionModel, []porcupine.Operation{r(3, 0, 1), r(2, 2, 3)}, false},
		{"session in order", sessionModel, []porcupine.Operation{r(1, 0, 1), w(4, 2, 3), r(5, 4, 5)}, true},
		{"stale read after a write", registerModel, []porcupine.Operation{w(1, 0, 1), w(2, 2, 3), r(1, 4, 5)}, false},
		{"read concurrent with a write", registerModel, []porcupine.Operation{w(1, 0, 1), w(2, 2, 6), r(1, 4, 5)}, true},
	} {
		if got := porcupine.CheckOperations(tc.model, tc.h); got != tc.ok {
			t.Errorf("%s: linearizable %v, want %v", tc.name, got, tc.ok)
		}
	}
}
