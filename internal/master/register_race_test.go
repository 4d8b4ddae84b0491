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
// fail says so (KindUnavailable, retry), and writes are prepared.
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
	if prepared == 0 {
		t.Error("no write was prepared while the chunkservers registered again")
	}
}
