package bench

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestTraceHandlerKeepsClientEvents: the client library's debug records
// about read pieces and write and append attempts become Events with their
// fields; other records are dropped; the count is bounded.
func TestTraceHandlerKeepsClientEvents(t *testing.T) {
	h := &traceHandler{}
	log := slog.New(h)
	t0 := time.Unix(1700000000, 500_000_000)
	log.LogAttrs(context.Background(), slog.LevelDebug, "chunkfs read: piece",
		slog.Uint64("handle", 12), slog.String("replica", "198.18.1.3:7001"), slog.Int("offset", 1<<19),
		slog.Int("bytes", 1<<17), slog.Int64("start_ns", t0.UnixNano()), slog.Duration("took", 1500*time.Millisecond),
		slog.Bool("own", false), slog.String("err", "boom"))
	log.LogAttrs(context.Background(), slog.LevelDebug, "chunkfs append: attempt",
		slog.Duration("push", 900*time.Millisecond), slog.Duration("append", 4*time.Millisecond))
	log.LogAttrs(context.Background(), slog.LevelDebug, "chunkfs write: attempt",
		slog.Duration("prepare", 2*time.Millisecond), slog.Duration("push", 800*time.Millisecond),
		slog.Duration("wait", 0), slog.Duration("lease", 0), slog.Duration("write", 3*time.Millisecond))
	log.Info("chunkfs mount: something else")
	ev := h.take()
	if len(ev) != 3 {
		t.Fatalf("events %+v, want 3", ev)
	}
	want := Event{What: "read: piece", StartMS: float64(t0.UnixNano()) / 1e6, MS: 1500, Replica: "198.18.1.3:7001",
		Handle: 12, Offset: 1 << 19, Bytes: 1 << 17, Other: true, Err: "boom"}
	if ev[0].Steps != nil || !eventEqual(ev[0], want) {
		t.Fatalf("read event %+v, want %+v", ev[0], want)
	}
	if ev[1].What != "append: attempt" || ev[1].Steps["push"] != 900 || ev[1].Steps["append"] != 4 {
		t.Fatalf("append event %+v", ev[1])
	}
	if w := ev[2]; w.What != "write: attempt" || len(w.Steps) != 5 || w.Steps["prepare"] != 2 || w.Steps["push"] != 800 || w.Steps["write"] != 3 {
		t.Fatalf("write event %+v", w)
	}
	if len(h.take()) != 0 {
		t.Fatal("take did not forget the events")
	}
	for range maxEvents + 10 {
		log.Debug("chunkfs read: piece")
	}
	if n := len(h.take()); n != maxEvents {
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
