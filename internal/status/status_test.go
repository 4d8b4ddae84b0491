package status

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

func TestRatesOverPeriods(t *testing.T) {
	var r Rates
	if got := r.Over(time.Minute); got != (Rate{}) {
		t.Fatalf("empty rates: %+v", got)
	}
	// Two hours: the first at 1 op/s and 10 B/s read, the second at 3 op/s
	// and 30 B/s, the last minute at 6 op/s.
	var tot Totals
	for s := 0; s <= 2*3600; s++ {
		r.Record(t0.Add(time.Duration(s)*time.Second), tot)
		switch {
		case s < 3600:
			tot.Ops, tot.ReadBytes = tot.Ops+1, tot.ReadBytes+10
		case s < 2*3600-60:
			tot.Ops, tot.ReadBytes = tot.Ops+3, tot.ReadBytes+30
		default:
			tot.Ops, tot.ReadBytes = tot.Ops+6, tot.ReadBytes+30
		}
	}
	if m := r.Over(time.Minute); !near(m.Ops, 6) || m.Over != time.Minute {
		t.Errorf("last minute: %+v, want 6 ops/s over 1m", m)
	}
	if h := r.Over(time.Hour); !near(h.Ops, (3*3540+6*60)/3600.0) || !near(h.ReadBytes, 30) {
		t.Errorf("last hour: %+v", h)
	}
	if s := r.SinceStart(); !near(s.Ops, (3600+3*3540+6*60)/7200.0) || s.Over != 2*time.Hour {
		t.Errorf("since start: %+v", s)
	}
	if h := r.History(); len(h) != HourSamples || !near(h[len(h)-1].Rate.Ops, 6) || !near(h[0].Rate.Ops, 3) {
		t.Errorf("history: %d points, last %+v", len(h), h[len(h)-1])
	}
}

func TestRatesShortHistoryAndClockBack(t *testing.T) {
	var r Rates
	r.Record(t0, Totals{})
	r.Record(t0.Add(5*time.Second), Totals{Ops: 50})
	if m := r.Over(time.Minute); !near(m.Ops, 10) || m.Over != 5*time.Second {
		t.Errorf("5 s of history: %+v", m)
	}
	r.Record(t0.Add(time.Second), Totals{Ops: 1000}) // clock went back: ignored
	if m := r.Over(time.Hour); !near(m.Ops, 10) {
		t.Errorf("after a clock step back: %+v", m)
	}
	if len(r.History()) != 0 {
		t.Errorf("history within one step: %v", r.History())
	}
}

func TestTable2(t *testing.T) {
	tb := NewTable2(Cluster{
		Servers:  []Server{{Alive: true, Chunks: 2, Used: 65537}, {Alive: false, Chunks: 9, Used: 1 << 30}},
		Capacity: 1 << 40, Used: 65537, Files: 3, Chunks: 2, MasterMetadata: -1,
	})
	if tb.Chunkservers != 1 || tb.DeadChunkservers != 1 || tb.ChunkserverMetadata != 2*36+4*2 {
		t.Errorf("table 2: %+v", tb)
	}
	rows := tb.Rows()
	if len(rows) != 8 || rows[0].Value != "1 (1 dead)" || rows[1].Value != "1.0 TiB" || !strings.Contains(rows[7].Value, "not known") {
		t.Errorf("rows: %+v", rows)
	}
	if MetaFileBytes(0) != 36 || MetaFileBytes(1) != 40 || MetaFileBytes(64<<20) != 36+4*1024 {
		t.Errorf("MetaFileBytes: %d %d %d", MetaFileBytes(0), MetaFileBytes(1), MetaFileBytes(64<<20))
	}
}

func TestTable3Rows(t *testing.T) {
	var r Rates
	r.Record(t0, Totals{})
	r.Record(t0.Add(time.Minute), Totals{ReadBytes: 60 << 20, Ops: 120})
	h, rows := NewTable3(&r, true).Rows()
	if len(h) != 4 || rows[0][1] != "1.0 MiB/s" || rows[2][3] != "2.0 Ops/s" {
		t.Errorf("table 3: %v %v", h, rows)
	}
	_, rows = NewTable3(&r, false).Rows()
	if rows[0][1] != "not reported" {
		t.Errorf("unknown traffic: %v", rows)
	}
}
