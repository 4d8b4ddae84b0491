package bench

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

// TestTraceRecorderKeepsClientEvents: what the client's Trace reports of
// read pieces, write and append attempts, retries and lease waits become
// Events with their fields, steps not reached left out; the count is
// bounded.
func TestTraceRecorderKeepsClientEvents(t *testing.T) {
	r := newTraceRecorder()
	t0 := time.Unix(1700000000, 500_000_000)
	r.now = func() time.Time { return t0 }
	tr := r.trace()
	tr.PieceRead(client.PieceRead{Handle: 12, Replica: "198.18.1.3:7001", Offset: 1 << 19, Bytes: 1 << 17,
		Start: t0, Took: 1500 * time.Millisecond, Other: true, Err: errors.New("boom")})
	tr.WriteAttempt(client.WriteAttempt{Append: true, Handle: 3, Length: 1 << 20, Replicas: []string{"a:1", "b:1"}, Start: t0,
		Took: 905 * time.Millisecond, Push: 900 * time.Millisecond, Apply: 4 * time.Millisecond})
	tr.WriteAttempt(client.WriteAttempt{Handle: 4, Length: 1 << 20, Start: t0, Took: time.Second, Prepare: 2 * time.Millisecond,
		Push: 800 * time.Millisecond, Apply: 3 * time.Millisecond, Err: chunkfs.E("write", "/f", chunkfs.KindStale, "gone")})
	tr.Retry(client.Retry{Op: "write", Path: "/f", Err: errors.New("stale")})
	tr.LeaseWait(client.LeaseWait{Path: "/f", Left: 100 * time.Millisecond, Wait: 1100 * time.Millisecond})
	ev := r.take()
	if len(ev) != 5 {
		t.Fatalf("events %+v, want 5", ev)
	}
	want := Event{What: "read: piece", StartMS: float64(t0.UnixNano()) / 1e6, MS: 1500, Replica: "198.18.1.3:7001",
		Handle: 12, Offset: 1 << 19, Bytes: 1 << 17, Other: true, Err: "boom"}
	if ev[0].Steps != nil || !eventEqual(ev[0], want) {
		t.Fatalf("read event %+v, want %+v", ev[0], want)
	}
	if a := ev[1]; a.What != "append: attempt" || a.Replica != "a:1" || a.MS != 905 || len(a.Steps) != 2 || a.Steps["push"] != 900 || a.Steps["append"] != 4 {
		t.Fatalf("append event %+v", a)
	}
	if w := ev[2]; w.What != "write: attempt" || len(w.Steps) != 3 || w.Steps["prepare"] != 2 || w.Steps["push"] != 800 || w.Steps["write"] != 3 || w.Err == "" {
		t.Fatalf("write event %+v", w)
	}
	if rt := ev[3]; rt.What != "retry" || rt.Note != "write" || rt.Err != "stale" || rt.StartMS != want.StartMS {
		t.Fatalf("retry event %+v", rt)
	}
	if lw := ev[4]; lw.What != "lease wait" || lw.MS != 1100 {
		t.Fatalf("lease wait event %+v", lw)
	}
	if len(r.take()) != 0 {
		t.Fatal("take did not forget the events")
	}
	for range maxEvents + 10 {
		tr.PieceRead(client.PieceRead{})
	}
	if n := len(r.take()); n != maxEvents {
		t.Fatalf("kept %d events, want the bound %d", n, maxEvents)
	}
}

func eventEqual(a, b Event) bool {
	return a.What == b.What && a.StartMS == b.StartMS && a.MS == b.MS && a.Replica == b.Replica && a.Handle == b.Handle &&
		a.Offset == b.Offset && a.Bytes == b.Bytes && a.Other == b.Other && a.Err == b.Err
}

// TestFullReportFitsALine: a worker's result at every bound (operation
// times and events) is one line the coordinator accepts.
func TestFullReportFitsALine(t *testing.T) {
	res := Result{Bytes: 1 << 40, Ops: maxOpTimes, StartNS: time.Now().UnixNano(), EndNS: time.Now().UnixNano()}
	for range maxOpTimes {
		res.OpsMS = append(res.OpsMS, 123456.789)
	}
	for range maxEvents {
		res.Events = append(res.Events, Event{What: "append: attempt", StartMS: 1733173373123.456, MS: 1234.567,
			Replica: "198.18.1.16:7001", Handle: 1 << 40, Offset: 1 << 26, Bytes: 1 << 20, Other: true,
			Err: strings.Repeat("x", 64), Steps: map[string]float64{"push": 1234.567, "append": 12.345}})
	}
	line, err := json.Marshal(workerMsg{Result: &res})
	if err != nil {
		t.Fatal(err)
	}
	if len(line) > maxReportLine {
		t.Fatalf("a full report is %d bytes, over maxReportLine (%d)", len(line), maxReportLine)
	}
}
