package master

import (
	"sync"
	"testing"
	"time"
)

// TestRepairWaitsForReregistration: after a restart the master leaves
// safe mode once two servers and every chunk are known, while a third
// holder has yet to register; the chunk looks short of a replica, but no
// clone is planned until the late server has had its heartbeat to
// register, and then none is needed.
func TestRepairWaitsForReregistration(t *testing.T) {
	tm, cs, _ := writtenChunk(t) // on a, b and c
	dir, clk := tm.cfg.Dir, tm.clock
	tm.close()

	var mu sync.Mutex // guards clones
	var clones []CloneEvent
	cfg := testConfig(t, dir, clk)
	cfg.RepairInterval = time.Hour // the test plans by hand (repairOnce); the loop would race it
	cfg.OnClone = func(e CloneEvent) {
		mu.Lock()
		clones = append(clones, e)
		mu.Unlock()
	}
	tm = startWith(t, cfg, clk)
	tm.register(cs[0], "r0")
	tm.register(cs[1], "r1")
	tm.startCS("d", "r3") // room for a clone
	if safe, why, _ := tm.m.safeModeStatus(); safe {
		t.Fatalf("still in safe mode: %s", why)
	}
	tm.m.repairOnce(true)
	clk.Advance(cfg.HeartbeatInterval)
	tm.m.repairOnce(true)
	mu.Lock()
	early := len(clones)
	mu.Unlock()
	if early != 0 {
		t.Fatalf("%d clones planned before c could register: %+v", early, clones)
	}

	tm.register(cs[2], "r2")
	clk.Advance(cfg.HeartbeatInterval)
	tm.m.repairOnce(true)
	mu.Lock()
	defer mu.Unlock()
	if len(clones) != 0 {
		t.Errorf("clones of a chunk with its three replicas: %+v", clones)
	}
}

// TestRepairStartsAfterSettling: a holder that does not come back is
// repaired for once the settling time has passed.
func TestRepairStartsAfterSettling(t *testing.T) {
	tm, cs, _ := writtenChunk(t)
	dir, clk := tm.cfg.Dir, tm.clock
	tm.close()

	got := make(chan CloneEvent, 10)
	cfg := testConfig(t, dir, clk)
	cfg.RepairInterval = time.Hour // the test plans by hand (repairOnce); the loop would race it
	cfg.OnClone = func(e CloneEvent) {
		select {
		case got <- e:
		default:
		}
	}
	tm = startWith(t, cfg, clk)
	tm.register(cs[0], "r0")
	tm.register(cs[1], "r1")
	d := tm.startCS("d", "r3")
	clk.Advance(2 * cfg.HeartbeatInterval)
	tm.m.repairOnce(true)
	e := <-got
	if e.Done || e.Live != 2 || e.Target != d.addr {
		t.Errorf("first clone event %+v, want one of a two-replica chunk to d", e)
	}
}
