package master

import (
	"fmt"
	"sync"
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestRegisterDuringCallsToTheServer: chunkservers register again (as
// after a master restart or a lost connection) while the master grants
// leases, truncates chunks and copies shared ones on them. A registration
// rewrites the server's record, its address included, under regMu; the
// calls take the addresses under regMu before they go out, so the race
// detector finds nothing here (it found the lease call reading the
// address while a registration wrote it). A call the reset record makes
// fail says so (KindUnavailable, retry), and writes are prepared once
// the registrations stop.
func TestRegisterDuringCallsToTheServer(t *testing.T) {
	tm := startMaster(t, "", nil)
	var cs []*fakeCS
	for i := range 3 {
		cs = append(cs, tm.startCS(fmt.Sprintf("cs%d", i), fmt.Sprintf("r%d", i)))
	}
	const files = 40
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range cs {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := tm.c.Register(bg, &pb.RegisterRequest{Id: f.id, Addr: f.addr, Capacity: 1 << 40, Used: 1 << 30, Free: 1 << 39, Chunks: f.report()}); err != nil {
					t.Errorf("register %s: %v", f.id, err)
					return
				}
			}
		})
	}
	prepared := 0
	for i := range files {
		p := fmt.Sprintf("/f%d", i)
		tm.create(root, p)
		for range 3 { // a grant; a truncation's cut; a snapshot's copy
			if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: root, Path: p}); err != nil {
				if kindOf(err) != chunkfs.KindUnavailable {
					t.Errorf("prepare write %s: %v", p, err)
				}
				continue
			}
			prepared++
		}
		zero := int64(1)
		if _, err := tm.c.SetAttr(bg, &pb.SetAttrRequest{Caller: root, Path: p, Length: &zero}); err != nil && kindOf(err) != chunkfs.KindUnavailable {
			t.Errorf("truncate %s: %v", p, err)
		}
		if _, err := tm.c.MakeSnapshot(bg, &pb.SnapshotRequest{Caller: root, Src: p, Dst: p + ".snap"}); err != nil && kindOf(err) != chunkfs.KindUnavailable {
			t.Errorf("snapshot %s: %v", p, err)
		}
		if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: root, Path: p}); err != nil && kindOf(err) != chunkfs.KindUnavailable {
			t.Errorf("prepare write %s after its snapshot: %v", p, err)
		}
	}
	close(stop)
	wg.Wait()
	// How many writes the storm of registrations let through depends on
	// the scheduler; once it ends, writes go on.
	t.Logf("%d writes prepared during the registrations", prepared)
	tm.create(root, "/after")
	if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: root, Path: "/after"}); err != nil {
		t.Errorf("prepare write after the registrations: %v", err)
	}
}

// TestRegisterDuringReports: chunkservers register again, each time from
// another rack and with other space, while the master answers what it
// reads of them (cluster report, fsck, chunk locations, balancer and
// drain states, a drain and its undoing, corrupt replicas, heartbeats)
// and its background loops run (the fake clock moves on). A registration
// rewrites the server's record under regMu; whatever reads it must hold
// regMu too, or the race detector reports it here.
func TestRegisterDuringReports(t *testing.T) {
	tm := startMaster(t, "", nil)
	var cs []*fakeCS
	for i := range 4 {
		cs = append(cs, tm.startCS(fmt.Sprintf("cs%d", i), fmt.Sprintf("r%d", i)))
	}
	for i := range 8 {
		p := fmt.Sprintf("/f%d", i)
		tm.create(root, p)
		if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: root, Path: p}); err != nil && kindOf(err) != chunkfs.KindUnavailable {
			t.Fatalf("prepare write %s: %v", p, err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, f := range cs {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				rack := fmt.Sprintf("r%d", (i+n)%3)
				space := int64(1+n%4) << 38
				if _, err := tm.c.Register(bg, &pb.RegisterRequest{Id: f.id, Addr: f.addr, Rack: rack, Capacity: 1 << 40, Used: space / 2, Free: space, Chunks: f.report()}); err != nil {
					t.Errorf("register %s: %v", f.id, err)
					return
				}
			}
		})
	}
	tolerate := func(what string, err error) {
		t.Helper()
		switch kindOf(err) {
		case chunkfs.KindUnavailable, chunkfs.KindNotExist, chunkfs.KindInvalid:
		default:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
	}
	for round := range 30 {
		_, err := tm.c.ClusterReport(bg, &pb.ClusterReportRequest{})
		tolerate("cluster report", err)
		_, err = tm.c.Fsck(bg, &pb.FsckRequest{Caller: root, Path: "/"})
		tolerate("fsck", err)
		_, err = tm.c.GetChunks(bg, &pb.GetChunksRequest{Caller: root, Path: fmt.Sprintf("/f%d", round%8)})
		tolerate("get chunks", err)
		_, err = tm.c.Balance(bg, &pb.BalanceRequest{Caller: root, Action: "status"})
		tolerate("balance status", err)
		_, err = tm.c.Decommission(bg, &pb.DecommissionRequest{Caller: root})
		tolerate("drain states", err)
		victim := cs[round%len(cs)].id
		_, err = tm.c.Decommission(bg, &pb.DecommissionRequest{Caller: root, Server: victim})
		tolerate("drain", err)
		_, err = tm.c.Decommission(bg, &pb.DecommissionRequest{Caller: root, Server: victim, Recommission: true})
		tolerate("undo drain", err)
		_, err = tm.c.ReportCorrupt(bg, &pb.ReportCorruptRequest{Reporter: "test", Handle: 1, Replica: cs[round%len(cs)].addr})
		tolerate("report corrupt", err)
		for _, f := range cs {
			_, err = tm.c.Heartbeat(bg, &pb.HeartbeatRequest{Id: f.id, Addr: f.addr, Capacity: 1 << 40, Used: 1 << 30, Free: 1 << 39, Sample: f.report()})
			tolerate("heartbeat", err)
		}
		tm.clock.Advance(tm.cfg.HeartbeatInterval)
	}
	close(stop)
	wg.Wait()
}
