package bench

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestMixPickFollowsWeights(t *testing.T) {
	m := DefaultMix()
	if got := m.ReadShare(); math.Abs(got-0.9) > 1e-9 {
		t.Fatalf("default mix reads %g, want 0.9", got)
	}
	counts := map[MetaOp]int{}
	const n = 100000
	for i := range n {
		counts[m.Pick((float64(i)+0.5)/n)]++
	}
	for op, w := range m {
		if got := 100 * float64(counts[op]) / n; math.Abs(got-w) > 0.01 {
			t.Errorf("%s picked %.3f %%, want %g %%", op, got, w)
		}
	}
	if w := m.Writes(); w.ReadShare() != 0 || len(w) != 4 {
		t.Errorf("writes of the mix: %v", w)
	}
}

func TestParseMixRoundTrip(t *testing.T) {
	m, err := ParseMix(DefaultMix().String())
	if err != nil {
		t.Fatal(err)
	}
	for op, w := range DefaultMix() {
		if math.Abs(m[op]-w) > 1e-9 {
			t.Errorf("%s: %g after a round trip, want %g", op, m[op], w)
		}
	}
	for _, bad := range []string{"stat", "stat=x", "chmod=1", "stat=-1", "stat=0"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) accepted", bad)
		}
	}
}

func TestObserverColumns(t *testing.T) {
	cfg := DefaultObserversConfig()
	cols := cfg.Columns()
	want := []struct {
		name string
		rate float64
	}{{"0 %", 1000}, {"20 %", 1000}, {"50 %", 1000}, {"100 %", 1000}, {"writes 2x", 200}, {"writes 4x", 400}}
	if len(cols) != len(want) {
		t.Fatalf("%d columns, want %d", len(cols), len(want))
	}
	for i, w := range want {
		if cols[i].Name != w.name || math.Abs(cols[i].Rate-w.rate) > 1e-6 {
			t.Errorf("column %d: %s at %g/s, want %s at %g/s", i, cols[i].Name, cols[i].Rate, w.name, w.rate)
		}
	}
	if !cols[5].WriteOnly || cols[5].Mix.ReadShare() != 0 {
		t.Errorf("writes 4x is not write-only: %+v", cols[5])
	}
	cfg.Binary, cfg.WorkerArgv = "chunkfs", []string{"w"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Clients = 4 // 20 % of 4 clients is not a whole client
	if err := cfg.Validate(); err == nil {
		t.Error("a share that is no whole number of clients was accepted")
	}
}

// TestNameModelReadYourWrites drives one client's model through writes and
// reads, overlapping and not.
func TestNameModelReadYourWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	m := newNameModel()
	c := m.plan(MetaCreate, r)
	m.done(c, true)
	st := m.plan(MetaStat, r)
	if st.Name != c.Name || !st.Exists {
		t.Fatalf("stat after create: %+v", st)
	}
	if bad := m.check(st, nil); len(bad) != 1 {
		t.Errorf("a stat missing the client's own create: %v, want one violation", bad)
	}
	if bad := m.check(st, []string{c.Name}); len(bad) != 0 {
		t.Errorf("a stat finding the create: %v", bad)
	}
	// A list overlapping a delete of the name may see it or not.
	ls := m.plan(MetaList, r)
	del := m.plan(MetaDelete, r)
	if del.Name != c.Name {
		t.Fatalf("delete of %q, want %q", del.Name, c.Name)
	}
	m.done(del, true)
	if bad := m.check(ls, nil); len(bad) != 0 {
		t.Errorf("a list overlapping a delete: %v", bad)
	}
	// After the delete, a stat must not find the name.
	st = m.plan(MetaStat, r)
	if st.Name != c.Name || st.Exists {
		t.Fatalf("stat after delete: %+v", st)
	}
	if bad := m.check(st, []string{c.Name}); len(bad) != 1 {
		t.Errorf("a stat finding a deleted name: %v, want one violation", bad)
	}
	// With nothing to act on, a rename becomes a create.
	if p := m.plan(MetaRename, r); p.Op != MetaCreate {
		t.Errorf("rename with no names planned as %s", p.Op)
	}
}

func TestNameModelRename(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := newNameModel()
	d := m.plan(MetaMkdir, r)
	m.done(d, true)
	rn := m.plan(MetaRename, r)
	if rn.Name != d.Name || !rn.Dir || rn.To == "" {
		t.Fatalf("rename plan %+v", rn)
	}
	m.done(rn, true)
	ls := m.plan(MetaList, r)
	if bad := m.check(ls, []string{rn.To}); len(bad) != 0 {
		t.Errorf("list after rename: %v", bad)
	}
	if bad := m.check(ls, []string{rn.Name}); len(bad) != 2 {
		t.Errorf("list showing the old name only: %v, want two violations", bad)
	}
}

func TestSummarize(t *testing.T) {
	var v []float64
	for i := 100; i >= 1; i-- {
		v = append(v, float64(i))
	}
	l := summarize(v)
	if l.N != 100 || l.MeanMS != 50.5 || l.P50MS != 51 || l.P90MS != 91 || l.P99MS != 100 {
		t.Errorf("summary %+v", l)
	}
	if l := summarize(nil); l.N != 0 {
		t.Errorf("empty summary %+v", l)
	}
}

func fakeColumn(c Column, writes int64, writeMS, readMS, leaderCPU float64) ColumnResult {
	reads := int64(0)
	if !c.WriteOnly {
		reads = 9 * writes
	}
	return ColumnResult{Column: c,
		Load: MetaResult{Seconds: 10, Ops: writes + reads, OpsPerSec: float64(writes+reads) / 10,
			Writes: Latency{N: writes, MeanMS: writeMS}, Reads: Latency{N: reads, MeanMS: readMS}, CPUSeconds: 1},
		Leader: MasterUse{ID: "m1", CPU: leaderCPU, Queue: QueueTimes{Calls: 1000, MeanMS: 1, P50MS: 0.5, P90MS: 2}}}
}

func TestObserversTableAndVerdict(t *testing.T) {
	cfg := DefaultObserversConfig()
	cols := cfg.Columns()
	rep := &ObserversReport{Started: time.Unix(0, 0), Config: cfg, Columns: []ColumnResult{
		fakeColumn(cols[0], 1000, 50, 30, 0.25),
		fakeColumn(cols[3], 1000, 14, 5, 0.1),
		fakeColumn(cols[5], 4000, 40, 0, 0.25),
	}}
	tab := rep.Table()
	for _, want := range []string{"| | 0 % | 100 % | writes 4x |", "| Average write latency (ms) | 50.00 | 14.00 | 40.00 |",
		"| Average read latency (ms) | 30.00 | 5.00 | N/A |", "| Acknowledged writes/s | 100 | 100 | 400 |",
		"| Leader CPU per write (ms) | - | 1.00 | 0.62 |"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if v := rep.Verdict(); !strings.Contains(v, "4.00x") || !strings.Contains(v, "target (>= 4x, no worse latency) met") {
		t.Errorf("verdict:\n%s", v)
	}
	rep.Columns[2].Load.Writes.MeanMS = 60 // 4x, but slower writes
	if v := rep.Verdict(); !strings.Contains(v, "NOT met") {
		t.Errorf("verdict with worse latency:\n%s", v)
	}
}
