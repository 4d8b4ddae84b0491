package master

import (
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// TestTrafficFromReports follows Table 3's read and write totals through
// chunkserver registrations and heartbeats: the first report is a
// baseline, growth is summed across servers, a restarted server's smaller
// totals count whole, and negative counters are refused, changing nothing.
func TestTrafficFromReports(t *testing.T) {
	tm := startMaster(t, "", nil)
	a, b := tm.startCS("cs-a", "r1"), tm.startCS("cs-b", "r2")
	beat := func(f *fakeCS, read, written int64) error {
		_, err := tm.c.Heartbeat(bg, &pb.HeartbeatRequest{Id: f.id, Addr: f.addr, Capacity: 1 << 40, Free: 1 << 39, BytesRead: read, BytesWritten: written})
		return err
	}
	want := func(step string, read, written int64) {
		t.Helper()
		if f := tm.m.Figures(); f.ReadBytes != read || f.WrittenBytes != written {
			t.Errorf("%s: figures read %d, written %d; want %d, %d", step, f.ReadBytes, f.WrittenBytes, read, written)
		}
	}
	want("registered", 0, 0)
	for _, s := range []struct {
		f                     *fakeCS
		read, written         int64
		wantRead, wantWritten int64
		step                  string
	}{
		{a, 100, 1000, 100, 1000, "a's first heartbeat: registered with 0"},
		{b, 50, 0, 150, 1000, "b reads"},
		{a, 300, 1500, 350, 1500, "a grows"},
		{a, 300, 1500, 350, 1500, "a idle"},
		{a, 20, 10, 370, 1510, "a restarted"},
	} {
		if err := beat(s.f, s.read, s.written); err != nil {
			t.Fatalf("%s: %v", s.step, err)
		}
		want(s.step, s.wantRead, s.wantWritten)
	}
	if err := beat(b, -1, 5); kindOf(err) != chunkfs.KindInvalid {
		t.Fatalf("a heartbeat with a negative counter: %v, want invalid", err)
	}
	want("refused", 370, 1510)
	if _, err := tm.c.Register(bg, &pb.RegisterRequest{Id: "cs-c", Addr: "127.0.0.1:1", Capacity: 1, BytesWritten: -5}); kindOf(err) != chunkfs.KindInvalid {
		t.Fatalf("a registration with a negative counter: %v, want invalid", err)
	}
	if f := tm.m.Figures(); f.LiveServers != 2 {
		t.Errorf("%d live servers after the refused registration, want 2", f.LiveServers)
	}
}

// A master that starts while its chunkservers have long been running
// counts from their first report on, not what they did before.
func TestTrafficBaselineIsTheFirstReport(t *testing.T) {
	var tr traffic
	tr.note("x", 1<<40, 1<<41)
	if r, w := tr.totals(); r != 0 || w != 0 {
		t.Fatalf("baseline counted: %d, %d", r, w)
	}
	tr.note("x", 1<<40+5, 1<<41+7)
	if r, w := tr.totals(); r != 5 || w != 7 {
		t.Fatalf("totals %d, %d; want 5, 7", r, w)
	}
}
