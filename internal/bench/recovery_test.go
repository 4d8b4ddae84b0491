package bench

import (
	"bytes"
	"image/png"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCloneLimit(t *testing.T) {
	for _, c := range []struct {
		n    CloneNetwork
		want float64
	}{
		{CloneNetwork{NIC: 10 * Mbit, CloneRate: 625_000, Survivors: 7}, 4.375}, // the throttle binds
		{CloneNetwork{NIC: 10 * Mbit, CloneRate: 0, Survivors: 7}, 8.75},        // unlimited: the NICs
		{CloneNetwork{NIC: 10 * Mbit, CloneRate: 50 << 20, Survivors: 5}, 6.25}, // a throttle above the NIC
		{CloneNetwork{NIC: 10 * Mbit, CloneRate: 625_000, Survivors: 0}, 0},
		// Four of seven hold the chunks: their NICs still send more than
		// the seven pull; two of them would not.
		{CloneNetwork{NIC: 10 * Mbit, CloneRate: 625_000, Survivors: 7, Sources: 4, MaxClones: 2}, 4.375},
		{CloneNetwork{NIC: 10 * Mbit, CloneRate: 625_000, Survivors: 7, Sources: 2, MaxClones: 2}, 2.5},
		{CloneNetwork{NIC: 10 * Mbit, CloneRate: 625_000, Survivors: 7, Sources: 2, MaxClones: 1}, 1.25},
		// A source throttle bounds what each source sends, all survivors
		// sources or a few.
		{CloneNetwork{NIC: 10 * Mbit, CloneRate: 625_000, SourceRate: 312_500, Survivors: 5, MaxClones: 2}, 1.5625},
		{CloneNetwork{NIC: 10 * Mbit, CloneRate: 625_000, SourceRate: 625_000, Survivors: 5, MaxClones: 2}, 3.125},
		{CloneNetwork{NIC: 10 * Mbit, CloneRate: 625_000, SourceRate: 625_000, Survivors: 7, Sources: 2, MaxClones: 2}, 1.25},
	} {
		if got := c.n.Limit(); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("%+v: limit %g MB/s, want %g", c.n, got, c.want)
		}
	}
	n := CloneNetwork{NIC: 10 * Mbit, CloneRate: 625_000, Survivors: 4} // 2.5 MB/s
	if got := n.TransferTime(10_000_000); got != 4*time.Second {
		t.Errorf("10 MB at 2.5 MB/s: %v, want 4s", got)
	}
	if got := (CloneNetwork{}).TransferTime(1); got != 0 {
		t.Errorf("no survivors: %v, want 0", got)
	}
}

func TestHealTime(t *testing.T) {
	n := CloneNetwork{NIC: 10 * Mbit, CloneRate: 625_000, Survivors: 4, MaxClones: 2} // 2.5 MB/s; 1.25 a source
	if got := n.SendRate(); got != 1.25 {
		t.Errorf("source rate %g MB/s, want the NIC's 1.25", got)
	}
	spread := map[string]int64{"a": 2.5e6, "b": 2.5e6, "c": 2.5e6, "d": 2.5e6}
	if got := n.HealTime(spread); got != 4*time.Second {
		t.Errorf("10 MB spread over 4 sources: %v, want 4s at the limit", got)
	}
	crowded := map[string]int64{"a": 10e6}
	if got := n.HealTime(crowded); got != 8*time.Second {
		t.Errorf("10 MB on one source: %v, want 8s at its NIC", got)
	}
	n.MaxClones = 1
	if got := n.HealTime(crowded); got != 16*time.Second {
		t.Errorf("10 MB on one source, one clone at a time: %v, want 16s at the throttle", got)
	}
	// A one-replica chunk's clone is urgent: its source throttle does not
	// hold it back.
	n.MaxClones, n.SourceRate = 2, 312_500
	if got := n.SendRate(); got != 0.3125 {
		t.Errorf("source rate under a source throttle of 0.3125 MB/s: %g", got)
	}
	if got := n.HealTime(crowded); got != 8*time.Second {
		t.Errorf("10 MB on one source under a source throttle: %v, want 8s at its NIC", got)
	}
}

func TestRecoveryConfigValidate(t *testing.T) {
	ok := DefaultRecoveryConfig()
	ok.Binary, ok.WorkerArgv = "chunkfs", []string{"chunkfs", "bench-worker"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	q := QuickRecoveryConfig()
	q.Binary, q.WorkerArgv = ok.Binary, ok.WorkerArgv
	if err := q.Validate(); err != nil {
		t.Fatalf("quick: %v", err)
	}
	for name, mod := range map[string]func(*RecoveryConfig){
		"too few servers":    func(c *RecoveryConfig) { c.Testbed.Chunkservers = 5 },
		"too few clients":    func(c *RecoveryConfig) { c.Testbed.Clients = 3 },
		"dead before a beat": func(c *RecoveryConfig) { c.DeadAfter = c.Heartbeat },
		"file above fill":    func(c *RecoveryConfig) { c.FileBytes = c.FillBytes + 1 },
		"odd chunk":          func(c *RecoveryConfig) { c.ChunkSize = 1000 },
		"no streams":         func(c *RecoveryConfig) { c.CloneStreams = 0 },
		"negative source":    func(c *RecoveryConfig) { c.CloneSourceRate = -1 },
		"negative yield":     func(c *RecoveryConfig) { c.UrgentYieldRate = -1 },
	} {
		c := ok
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
	one := ok
	one.Testbed.Chunkservers, one.Second = 4, false
	if err := one.Validate(); err != nil {
		t.Errorf("4 servers, one killed: %v", err)
	}
}

// samplePhase is a recovery from two of seven killed, sampled every
// second: detected at 5 s, the two one-replica chunks healed by 8 s (the
// fill's one by 7 s), the fill by 12 s after a clone a second, all by
// 20 s.
func samplePhase() RecoveryPhase {
	const kill = int64(1_000_000_000_000)
	dead := []string{"a:1", "b:1"}
	p := RecoveryPhase{Killed: dead, KillNS: kill, Survivors: 5, Limit: c0.cloneNetwork(5).Limit()}
	for sec := -1; sec <= 20; sec++ {
		s := ReplicaSample{AtNS: kill + int64(sec)*1e9, Used: map[string]int64{"a:1": 40e6, "b:1": 20e6, "c:1": 99e6},
			Alive: map[string]bool{"a:1": sec < 5, "b:1": sec < 5, "c:1": true}, Repaired: int64(max(sec-5, 0)), ByReplicas: []int{0, 0, 0, 30}}
		s.Live = 5
		if sec < 5 {
			s.Live = 6 // never 5 before the detection
		}
		s.FillByReplicas = []int{0, 0, 0, 20}
		if sec >= 5 && sec < 12 {
			s.FillByReplicas = []int{0, 0, 5, 15}
			s.ShortOn = map[string]int64{"c:1": 30e6, "d:1": 20e6, "e:1": 10e6}
		}
		switch {
		case sec >= 5 && sec < 8:
			s.ByReplicas, s.OneReplicaBytes, s.UnderReplicated = []int{0, 2, 10, 18}, 8e6, 12
			s.OneReplicaOn = map[string]int64{"c:1": 5e6, "d:1": 3e6}
		case sec >= 8 && sec < 20:
			s.ByReplicas, s.UnderReplicated = []int{0, 0, 10, 20}, 10
		}
		if sec >= 5 && sec < 7 { // the fill's one-replica chunk is healed first
			s.FillByReplicas = []int{0, 1, 4, 15}
		}
		p.Samples = append(p.Samples, s)
	}
	return p
}

// c0 is the configuration the sample phases are measured with.
var c0 = DefaultRecoveryConfig()

func TestRecoveryPhaseMeasure(t *testing.T) {
	c := DefaultRecoveryConfig() // 10 Mbit/s, 625 KB/s throttles
	p := samplePhase()
	p.measure(c)
	near := func(name string, got, want float64) {
		t.Helper()
		if got < want-1e-6 || got > want+1e-6 {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	near("detected", p.DetectedS, 5)
	if p.Sources != 3 {
		t.Errorf("%d sources, want the 3 holders of chunks short of replicas", p.Sources)
	}
	near("one-replica healed", p.OneHealedS, 8)
	near("healed", p.HealedS, 20)
	near("lost MB", float64(p.LostBytes)/1e6, 60)
	near("fill healed", p.FillHealedS, 12)
	near("clone MB/s", p.CloneMBps, 4.194304) // 7 clones of 4 MiB in 7 s
	near("limit", p.Limit, 1.875)             // 3 sources at their throttle's 0.625 MB/s
	near("efficiency", p.Efficiency, 4.194304/1.875)
	near("one-replica transfer", p.OneTransferS, 4) // 5 MB from c at its NIC's 1.25 MB/s
	near("one-replica factor", p.OneFactor, 0.75)
	near("fill one-replica healed", p.FillOneHealedS, 7)
	near("fill one-replica factor", p.FillOneFactor, 0.5)
	if p.OneReplica != 2 || p.TwoReplicas != 10 || p.UnderReplicated != 12 || p.Repaired != 15 {
		t.Errorf("counts %d/%d, under %d, repaired %d; want 2/10, 12, 15", p.OneReplica, p.TwoReplicas, p.UnderReplicated, p.Repaired)
	}
}

// A chunk at zero replicas (a writer's new chunk, not yet on a server the
// master counts) is no one-replica chunk: it neither delays the one-replica
// chunks' healing nor makes one of a phase that had none.
func TestRecoveryPhaseMeasureZeroReplicas(t *testing.T) {
	c := DefaultRecoveryConfig()
	p := samplePhase()
	for i := range p.Samples {
		if sec := (p.Samples[i].AtNS - p.KillNS) / 1e9; sec == 10 || sec == 11 {
			p.Samples[i].ByReplicas = []int{1, 0, 10, 19}
		}
	}
	p.measure(c)
	if p.OneHealedS != 8 {
		t.Errorf("one-replica chunks healed at %g s, want 8 (a zero-replica chunk at 10-11 s is not one of them)", p.OneHealedS)
	}
	none := samplePhase()
	for i := range none.Samples {
		s := &none.Samples[i]
		if s.ByReplicas[1] > 0 {
			s.ByReplicas, s.OneReplicaBytes, s.OneReplicaOn = []int{0, 0, 12, 18}, 0, nil
		}
		if sec := (s.AtNS - none.KillNS) / 1e9; sec == 10 {
			s.ByReplicas = []int{1, 0, 10, 19}
		}
	}
	none.measure(c)
	if none.OneReplica != 0 || none.OneHealedS != none.DetectedS || none.OneFactor != 0 {
		t.Errorf("no chunk at one replica: %d counted, healed at %g s (detected %g), factor %g; want 0, the detection, 0",
			none.OneReplica, none.OneHealedS, none.DetectedS, none.OneFactor)
	}
}

func TestWindowRate(t *testing.T) {
	res := []Result{{Recovery: &RecoveryResult{Ops: []OpDone{{EndNS: 1e9, Bytes: 1e6}, {EndNS: 2e9, Bytes: 1e6}, {EndNS: 3e9, Bytes: 0, Err: "x"}}}},
		{Recovery: &RecoveryResult{Ops: []OpDone{{EndNS: 2.5e9, Bytes: 2e6}}}}}
	rate, errs := windowRate(res, 1.5e9, 3.5e9)
	if rate != 1.5 || errs != 1 {
		t.Errorf("rate %g MB/s, %d errors; want 1.5, 1", rate, errs)
	}
}

func TestRecoveryReportOutput(t *testing.T) {
	c := DefaultRecoveryConfig()
	r := newRecoveryReport(c)
	one := samplePhase() // as if one of six were killed, at a limit of 5 MB/s
	one.Killed, one.Limit = one.Killed[:1], 5
	for i := range one.Samples { // a watcher that named no sources: the limit stays
		one.Samples[i].ShortOn = nil
	}
	one.measure(c)
	two := samplePhase()
	two.measure(c)
	r.Phases = []RecoveryPhase{one, two}
	r.Clients = []ClientRates{{Kind: "reads", Clients: 2, Before: 2, During: []float64{1.5, 0.8}, Errors: []int{0, 3}}}
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"8 chunkservers, 3 replicas, NICs 10 Mbit/s",
		"clone rate 0.625 MB/s per target server",
		"target clone rate, one killed: want ≥ 80 % of 5.000 MB/s, got 4.194 MB/s = 83.9 %: met",
		"target one-replica chunks healed, two killed: want ≤ 2× their 4.0 s at the limit, got 3.0 s after detection = 0.75×: met",
		"target reads during recovery 1: want ≥ 50 % of 2.000 MB/s, got 1.500 MB/s = 75 %: met",
		"target reads during recovery 2: want ≥ 50 % of 2.000 MB/s, got 0.800 MB/s = 40 %: NOT MET",
		"GFS (paper §6.2.5)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if dir := os.Getenv("CHUNKFS_BENCH_PNG_DIR"); dir != "" {
		var fig bytes.Buffer
		r.WritePNG(&fig)
		os.WriteFile(dir+"/recovery.png", fig.Bytes(), 0o644)
	}
	if err := r.WritePNG(&b); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil || img.Bounds().Dx() != 2*panelW {
		t.Errorf("figure: %v, %v", img.Bounds(), err)
	}
}

// TestCloneMinRate: the master's clone deadline allows a clone a quarter
// of its stream's share of the throttle.
func TestCloneMinRate(t *testing.T) {
	c := DefaultRecoveryConfig()
	per := c.CloneRate / int64(c.CloneStreams)
	if c.cloneMinRate() != per/4 {
		t.Errorf("clone min rate %d, want %d", c.cloneMinRate(), per/4)
	}
	if !slices.Contains(c.clusterConfig().ChunkserverArgs, "--clone-streams") {
		t.Errorf("chunkserver args %v lack --clone-streams", c.clusterConfig().ChunkserverArgs)
	}
}

// TestReadCeiling: the readers' ceiling is their own NICs, or what the
// live servers' NICs send besides the clones and the writers' chain hops
// when that is less; the report sets it before the failure and for each
// recovery, and prints the readers' rates against it.
func TestReadCeiling(t *testing.T) {
	nic := 10 * Mbit // 1.25 MB/s
	for _, c := range []struct {
		readers, live        int
		clones, writes, want float64
	}{
		{2, 8, 0, 1.08, 2.5},      // the readers' NICs bind
		{2, 5, 2.36, 0.68, 2.5},   // 6.25 - 2.36 - 2 × 0.68 = 2.53 left
		{2, 5, 3.125, 1.0, 1.125}, // 6.25 - 3.125 - 2 × 1.0
		{2, 3, 3.0, 1.0, 0},       // nothing left
		{1, 5, 0, 0, 1.25},
	} {
		if got := readCeiling(c.readers, c.live, 3, nic, c.clones, c.writes); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("%d readers, %d live, clones %g, writes %g: ceiling %g, want %g", c.readers, c.live, c.clones, c.writes, got, c.want)
		}
	}
	c := DefaultRecoveryConfig()
	r := newRecoveryReport(c)
	r.Phases = []RecoveryPhase{{Survivors: 5, Repaired: 100, HealedS: 100}} // 100 × 4 MiB in 100 s: 4.194 MB/s
	r.Clients = []ClientRates{
		{Kind: "reads", Clients: 2, Before: 2.25, During: []float64{1.0}, Errors: []int{0}},
		{Kind: "writes", Clients: 1, Before: 1.0, During: []float64{0.5}, Errors: []int{0}},
	}
	r.readCeilings(c)
	want := []float64{2.5, 6.25 - 4*1.048576 - 2*0.5}
	got := r.Clients[0].Ceiling
	if len(got) != 2 || got[0] != want[0] || got[1] < want[1]-1e-9 || got[1] > want[1]+1e-9 {
		t.Errorf("ceilings %v, want %v", got, want)
	}
	if r.Clients[1].Ceiling != nil {
		t.Errorf("writers got a read ceiling: %v", r.Clients[1].Ceiling)
	}
	var b bytes.Buffer
	r.writeCeilings(&b)
	if s := b.String(); !strings.Contains(s, "reads against the most the NICs left them") || !strings.Contains(s, "before 90% of 2.500 MB/s; recovery 1 95% of 1.056") {
		t.Errorf("ceilings printed as %q", s)
	}
}
