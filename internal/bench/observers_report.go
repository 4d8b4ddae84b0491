package bench

import (
	"fmt"
	"strings"
)

// obsRow is one row of the observer table: its label and how to write a
// column's cell.
type obsRow struct {
	label string
	cell  func(c ColumnResult) string
}

func ms(v float64) string { return fmt.Sprintf("%.2f", v) }

// obsRows are the rows of HDFS-12943's table that chunkfs measures, then
// what shows where the capacity went.
var obsRows = []obsRow{
	{"Average write latency (ms)", func(c ColumnResult) string { return ms(c.Load.Writes.MeanMS) }},
	{"Average read latency (ms)", func(c ColumnResult) string {
		if c.Load.Reads.N == 0 {
			return "N/A"
		}
		return ms(c.Load.Reads.MeanMS)
	}},
	{"Leader RPC queue avg time (ms)", func(c ColumnResult) string { return ms(c.Leader.Queue.MeanMS) }},
	{"Leader RPC queue 50th percentile (ms)", func(c ColumnResult) string { return ms(c.Leader.Queue.P50MS) }},
	{"Leader RPC queue 90th percentile (ms)", func(c ColumnResult) string { return ms(c.Leader.Queue.P90MS) }},
	{"Leader RPC queue num ops (k)", func(c ColumnResult) string { return fmt.Sprintf("%.1f", float64(c.Leader.Queue.Calls)/1e3) }},
	{"Observers' RPCs (k)", func(c ColumnResult) string {
		n := int64(0)
		for _, o := range c.Observers {
			n += o.Queue.Calls
		}
		return fmt.Sprintf("%.1f", float64(n)/1e3)
	}},
	{"Offered ops/s", func(c ColumnResult) string { return fmt.Sprintf("%.0f", c.Column.Rate) }},
	{"Acknowledged ops/s", func(c ColumnResult) string { return fmt.Sprintf("%.0f", c.Load.OpsPerSec) }},
	{"Acknowledged writes/s", func(c ColumnResult) string { return fmt.Sprintf("%.0f", c.writesPerSec()) }},
	{"Write latency p90 (ms)", func(c ColumnResult) string { return ms(c.Load.Writes.P90MS) }},
	{"Observers' CPU, each (CPUs used)", func(c ColumnResult) string {
		var parts []string
		for _, o := range c.Observers {
			parts = append(parts, fmt.Sprintf("%.3f", o.CPU))
		}
		return strings.Join(parts, " / ")
	}},
	{"Leader CPU (CPUs used)", func(c ColumnResult) string { return fmt.Sprintf("%.3f", c.Leader.CPU) }},
	{"Leader CPU idle, before the run (CPUs)", func(c ColumnResult) string { return fmt.Sprintf("%.3f", c.Leader.IdleCPU) }},
	{"Leader throttled (% of periods)", func(c ColumnResult) string { return fmt.Sprintf("%.0f", 100*c.Leader.Throttled) }},
	{"Leader CPU per write (ms)", func(c ColumnResult) string {
		if c.Column.WriteOnly || c.Column.Share == 1 {
			return ms(c.leaderCPUPerWrite())
		}
		return "-"
	}},
	{"Generator CPU (CPUs used)", func(c ColumnResult) string {
		return fmt.Sprintf("%.3f", c.Load.CPUSeconds/max(c.Load.Seconds, 1e-9))
	}},
	{"Generator lateness mean / p99 (ms)", func(c ColumnResult) string {
		return ms(c.Load.Late.MeanMS) + " / " + ms(c.Load.Late.P99MS)
	}},
	{"Shed / failed ops", func(c ColumnResult) string { return fmt.Sprintf("%d / %d", c.Load.Shed, c.Load.Errors) }},
	{"Read-your-writes violations", func(c ColumnResult) string { return fmt.Sprint(c.Load.Violations) }},
}

func (c ColumnResult) writesPerSec() float64 {
	if c.Load.Seconds <= 0 {
		return 0
	}
	return float64(c.Load.Writes.N) / c.Load.Seconds
}

// leaderCPUPerWrite is the leader's CPU milliseconds per acknowledged
// write, all its work (heartbeats, Raft, reads it served) included.
func (c ColumnResult) leaderCPUPerWrite() float64 {
	if c.Load.Writes.N == 0 {
		return 0
	}
	return c.Leader.CPU * c.Load.Seconds * 1e3 / float64(c.Load.Writes.N)
}

// Table writes the report as a Markdown table, a column per column of
// the run.
func (r *ObserversReport) Table() string {
	var b strings.Builder
	b.WriteString("| |")
	for _, c := range r.Columns {
		fmt.Fprintf(&b, " %s |", c.Column.Name)
	}
	b.WriteString("\n|---|")
	for range r.Columns {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, row := range obsRows {
		fmt.Fprintf(&b, "| %s |", row.label)
		for _, c := range r.Columns {
			cell := "failed"
			if c.Err == "" {
				cell = row.cell(c)
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Verdict compares the run with the targets: with all reads on observers
// the leader sustains at least 4x the write throughput it has with none, at
// no worse write latency, and no read misses a client's own write. It
// names the leader's CPU floor, which bounds its write rate.
func (r *ObserversReport) Verdict() string {
	base, top := r.column(0, false), r.topWriteColumn()
	var b strings.Builder
	viol := int64(0)
	for _, c := range r.Columns {
		viol += c.Load.Violations
	}
	fmt.Fprintf(&b, "read-your-writes violations: %d (target 0)\n", viol)
	if base == nil || top == nil {
		b.WriteString("write throughput target: not measured (needs the 0 % column and a write-only column)\n")
		return b.String()
	}
	ratio := top.writesPerSec() / max(base.writesPerSec(), 1e-9)
	met := ratio >= 4*0.98 && top.Load.Writes.MeanMS <= base.Load.Writes.MeanMS
	fmt.Fprintf(&b, "write throughput: %.0f/s (%s) against %.0f/s (%s), %.2fx; write latency %.2f ms against %.2f ms: target (>= 4x, no worse latency) %s\n",
		top.writesPerSec(), top.Column.Name, base.writesPerSec(), base.Column.Name, ratio,
		top.Load.Writes.MeanMS, base.Load.Writes.MeanMS, map[bool]string{true: "met", false: "NOT met"}[met])
	if per := top.leaderCPUPerWrite(); per > 0 {
		fmt.Fprintf(&b, "leader CPU floor: %.2f ms of CPU per write, so at its cap of %g CPU it can take at most %.0f writes/s\n",
			per, r.Config.MasterCPU, r.Config.MasterCPU*1e3/per)
	}
	return b.String()
}

// column returns the mixed column with share s of reads on observers.
func (r *ObserversReport) column(s float64, writeOnly bool) *ColumnResult {
	for i, c := range r.Columns {
		if c.Err == "" && c.Column.Share == s && c.Column.WriteOnly == writeOnly {
			return &r.Columns[i]
		}
	}
	return nil
}

// topWriteColumn is the write-only column at the highest rate.
func (r *ObserversReport) topWriteColumn() *ColumnResult {
	var top *ColumnResult
	for i, c := range r.Columns {
		if c.Err == "" && c.Column.WriteOnly && (top == nil || c.Column.Rate > top.Column.Rate) {
			top = &r.Columns[i]
		}
	}
	return top
}
