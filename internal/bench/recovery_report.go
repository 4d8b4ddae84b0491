package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// RecoveryReport is the outcome of a bench recovery run.
type RecoveryReport struct {
	Started      time.Time  `json:"started"`
	Scale        float64    `json:"scale"`
	NICMbit      float64    `json:"nic_mbit"`
	Servers      int        `json:"chunkservers"`
	Replicas     int        `json:"replicas"`
	ChunkSize    int64      `json:"chunk_size"`
	FillBytes    int64      `json:"fill_bytes"`
	FileBytes    int64      `json:"file_bytes"`
	IOSize       int64      `json:"io_size"`
	CloneRate    int64      `json:"clone_rate"`        // bytes a second per target server; 0: unlimited
	SourceRate   int64      `json:"clone_source_rate"` // bytes a second per source server; 0: unlimited
	YieldRate    int64      `json:"urgent_yield_rate"` // bytes a second a source's other reads share while it sends an urgent clone; 0: no yield
	CloneStreams int        `json:"clone_streams"`
	MaxClones    int        `json:"max_clones"`
	DeadAfter    float64    `json:"dead_after_s"`
	Heartbeat    float64    `json:"heartbeat_s"`
	Fill         *Placement `json:"fill,omitempty"`
	// Phases: one killed, then (if run) two more.
	Phases  []RecoveryPhase `json:"phases"`
	Clients []ClientRates   `json:"clients,omitempty"`
}

// RecoveryPhase is one failure and the recovery from it. Times are in
// seconds from the kill.
type RecoveryPhase struct {
	Killed    []string `json:"killed"`
	KillNS    int64    `json:"kill_ns"`
	Survivors int      `json:"survivors"`
	// Limit is CloneNetwork.Limit with the survivors and, from the first
	// sample after the detection, the Sources: the survivors holding a
	// replica of a chunk short of replicas.
	Limit   float64 `json:"limit_mbps"`
	Sources int     `json:"sources"`
	// LostBytes is the chunk data the killed servers held, as they last
	// reported it: what the survivors must clone.
	LostBytes int64 `json:"lost_bytes"`
	// DetectedS is when the master had declared every victim dead
	// (--dead-after): cloning can only begin then.
	DetectedS float64 `json:"detected_s"`
	// The watched chunks (the fill and the writers' files) with one and
	// with two live replicas after the failure, and the bytes of the
	// one-replica ones; the cluster's under-replicated count.
	OneReplica      int              `json:"one_replica"`
	TwoReplicas     int              `json:"two_replicas"`
	OneReplicaBytes int64            `json:"one_replica_bytes"`
	OneReplicaOn    map[string]int64 `json:"one_replica_on,omitempty"` // by the one holder, at the most
	UnderReplicated int64            `json:"under_replicated"`
	Repaired        int64            `json:"repaired"` // clones completed during the phase
	// OneHealedS is when no chunk had a single replica any more;
	// FillHealedS when every chunk of the fill (under no lease) had its
	// replicas again, HealedS when every chunk had, the writers' chunks
	// of the last lease included (the master clones no chunk under a
	// lease).
	Healed      bool    `json:"healed"` // false: the watch ended first (RecoveryConfig.PhaseTimeout)
	OneHealedS  float64 `json:"one_healed_s"`
	FillHealedS float64 `json:"fill_healed_s"`
	HealedS     float64 `json:"healed_s"`
	// CloneMBps is the clones completed from the detection until the
	// fill was healed, times the chunk size, over that time: the rate
	// while the queue had chunks it could clone. Efficiency is CloneMBps
	// / Limit.
	FillClones int64   `json:"fill_clones"`
	CloneMBps  float64 `json:"clone_mbps"`
	Efficiency float64 `json:"efficiency"`
	// OneTransferS is how long the one-replica chunks' bytes take at
	// Limit, or at their busiest holder's SourceRate if longer
	// (CloneNetwork.HealTime); OneFactor is their healing time after
	// detection over it.
	OneTransferS float64 `json:"one_transfer_s"`
	OneFactor    float64 `json:"one_factor"`
	// FillOneHealedS is OneHealedS of the fill's chunks alone, which no
	// lease holds back (a writer's chunk left with one replica is cloned
	// only once its lease has ended); FillOneFactor is theirs over
	// OneTransferS.
	FillOneHealedS float64         `json:"fill_one_healed_s"`
	FillOneFactor  float64         `json:"fill_one_factor"`
	Samples        []ReplicaSample `json:"samples"`
}

// ClientRates is the readers' or the writers' aggregate rate before the
// first failure and during each recovery (kill to healed), in MB/s.
type ClientRates struct {
	Kind    string    `json:"kind"` // "reads" or "writes"
	Clients int       `json:"clients"`
	Before  float64   `json:"before_mbps"`
	During  []float64 `json:"during_mbps"`
	Errors  []int     `json:"errors"` // failed operations during each recovery
	// Ceiling is, for the readers, the most they could read before the
	// failure and during each recovery (readCeiling), in MB/s.
	Ceiling []float64 `json:"ceiling_mbps,omitempty"`
}

// readCeiling is the most, in MB/s, readers can read: their own NICs, and
// what the live chunkservers' NICs send besides clones at cloneMBps and
// the writers' chain hops (a write at writeMBps leaves replicas-1
// chunkservers on its way down the chain).
func readCeiling(readers, live, replicas int, nic Rate, cloneMBps, writeMBps float64) float64 {
	left := float64(live)*nic.MBps() - cloneMBps - float64(replicas-1)*writeMBps
	return max(min(float64(readers)*nic.MBps(), left), 0)
}

// The targets of issue 15.
const (
	cloneTarget  = 0.8 // of the limit
	oneTarget    = 2.0 // × the one-replica chunks' transfer time
	clientTarget = 0.5 // of the rate before the failure
)

func newRecoveryReport(c RecoveryConfig) *RecoveryReport {
	return &RecoveryReport{Started: time.Now().UTC(), Scale: c.Scale, NICMbit: float64(c.Testbed.NIC / Mbit),
		Servers: c.Testbed.Chunkservers, Replicas: c.Replicas, ChunkSize: c.ChunkSize, FillBytes: c.FillBytes,
		FileBytes: c.FileBytes, IOSize: c.IOSize, CloneRate: c.CloneRate, SourceRate: c.CloneSourceRate, YieldRate: c.UrgentYieldRate, CloneStreams: c.CloneStreams,
		MaxClones: c.MaxClones, DeadAfter: c.DeadAfter.Seconds(), Heartbeat: c.Heartbeat.Seconds()}
}

// measure derives the phase's figures from its samples.
func (p *RecoveryPhase) measure(c RecoveryConfig) {
	at := func(s ReplicaSample) float64 { return float64(s.AtNS-p.KillNS) / 1e9 }
	for _, addr := range p.Killed {
		p.LostBytes += lastAliveUsed(p.Samples, addr)
	}
	detected := -1
	for i, s := range p.Samples {
		if s.Err == "" && s.AtNS >= p.KillNS && s.Live == p.Survivors {
			detected = i
			break
		}
	}
	if detected < 0 || len(p.Samples) == 0 {
		return
	}
	p.DetectedS = at(p.Samples[detected])
	if on := p.Samples[detected].ShortOn; len(on) > 0 {
		p.Sources = len(on)
		p.Limit = c.cloneNetworkFrom(p.Survivors, p.Sources).Limit()
	}
	last := p.Samples[len(p.Samples)-1]
	p.HealedS, p.Healed = at(last), last.healed(p.Survivors, c.Replicas)
	p.Repaired = last.Repaired - p.Samples[detected].Repaired
	p.OneHealedS, p.FillOneHealedS, p.FillHealedS = p.DetectedS, p.DetectedS, p.HealedS
	fillOne := false
	fillHealed := false
	for _, s := range p.Samples[detected:] {
		if !fillHealed && s.Err == "" && atLeast(s.FillByReplicas, min(c.Replicas, p.Survivors)) {
			fillHealed, p.FillHealedS = true, at(s)
			p.FillClones = s.Repaired - p.Samples[detected].Repaired
		}
		if s.Err != "" {
			continue
		}
		p.OneReplica = max(p.OneReplica, s.ByReplicas[1])
		p.TwoReplicas = max(p.TwoReplicas, s.ByReplicas[min(2, len(s.ByReplicas)-1)])
		if s.OneReplicaBytes > p.OneReplicaBytes {
			p.OneReplicaBytes, p.OneReplicaOn = s.OneReplicaBytes, s.OneReplicaOn
		}
		p.UnderReplicated = max(p.UnderReplicated, s.UnderReplicated)
		// A chunk at zero replicas (a writer's new chunk, or one lost)
		// is no one-replica chunk: it has no source to be healed from.
		if s.ByReplicas[1] > 0 {
			p.OneHealedS = at(s) // healed at the next sample at the latest
		}
		if s.FillByReplicas[1] > 0 {
			p.FillOneHealedS, fillOne = at(s), true
		}
	}
	if !fillHealed {
		p.FillClones = last.Repaired - p.Samples[detected].Repaired
	}
	if p.OneReplica > 0 {
		p.OneHealedS = p.nextSampleAfter(p.OneHealedS)
	}
	if fillOne {
		p.FillOneHealedS = p.nextSampleAfter(p.FillOneHealedS)
	}
	if d := p.FillHealedS - p.DetectedS; d > 0 {
		p.CloneMBps = float64(p.FillClones*c.ChunkSize) / d / 1e6
	}
	if p.Limit > 0 {
		p.Efficiency = p.CloneMBps / p.Limit
	}
	p.OneTransferS = c.cloneNetwork(p.Survivors).HealTime(p.OneReplicaOn).Seconds()
	if p.OneTransferS > 0 {
		p.OneFactor = (p.OneHealedS - p.DetectedS) / p.OneTransferS
		p.FillOneFactor = (p.FillOneHealedS - p.DetectedS) / p.OneTransferS
	}
}

// nextSampleAfter returns the time of the first sample after t.
func (p *RecoveryPhase) nextSampleAfter(t float64) float64 {
	for _, s := range p.Samples {
		if at := float64(s.AtNS-p.KillNS) / 1e9; at > t {
			return at
		}
	}
	return t
}

// lastAliveUsed is the bytes addr held in the last sample that saw it alive.
func lastAliveUsed(samples []ReplicaSample, addr string) int64 {
	var used int64
	for _, s := range samples {
		if s.Alive[addr] {
			used = s.Used[addr]
		}
	}
	return used
}

// measureClients derives the readers' and writers' rates from their
// operations: before the first kill (from a second after they started) and
// from each kill to its recovery's end. res lists the readers, then the
// writers.
func (r *RecoveryReport) measureClients(c RecoveryConfig, start time.Time, res []Result) {
	if len(r.Phases) == 0 {
		return
	}
	kinds := []struct {
		name string
		res  []Result
	}{{"reads", res[:c.Readers]}, {"writes", res[c.Readers:]}}
	from := start.Add(min(time.Second, c.Baseline/5)).UnixNano()
	for _, k := range kinds {
		if len(k.res) == 0 {
			continue
		}
		cr := ClientRates{Kind: k.name, Clients: len(k.res)}
		cr.Before, _ = windowRate(k.res, from, r.Phases[0].KillNS)
		for _, p := range r.Phases {
			rate, errs := windowRate(k.res, p.KillNS, p.KillNS+int64(p.HealedS*1e9))
			cr.During, cr.Errors = append(cr.During, rate), append(cr.Errors, errs)
		}
		r.Clients = append(r.Clients, cr)
	}
	r.readCeilings(c)
}

// readCeilings sets the readers' Ceiling: before the failure beside the
// writers' rate, and in each recovery beside the clones it completed and
// the writers' rate over the same window.
func (r *RecoveryReport) readCeilings(c RecoveryConfig) {
	var reads *ClientRates
	var writes ClientRates
	for i := range r.Clients {
		if r.Clients[i].Kind == "reads" {
			reads = &r.Clients[i]
		} else {
			writes = r.Clients[i]
		}
	}
	if reads == nil {
		return
	}
	wrote := func(i int) float64 { // the writers' rate before (-1) or during recovery i
		if i < 0 || i >= len(writes.During) {
			return writes.Before
		}
		return writes.During[i]
	}
	reads.Ceiling = []float64{readCeiling(c.Readers, r.Servers, c.Replicas, c.Testbed.NIC, 0, wrote(-1))}
	for i, p := range r.Phases {
		clones := 0.0
		if p.HealedS > 0 {
			clones = float64(p.Repaired*c.ChunkSize) / p.HealedS / 1e6
		}
		reads.Ceiling = append(reads.Ceiling, readCeiling(c.Readers, p.Survivors, c.Replicas, c.Testbed.NIC, clones, wrote(i)))
	}
}

// windowRate is the MB/s of the operations that ended in [from, to), and
// how many of them failed.
func windowRate(res []Result, from, to int64) (float64, int) {
	if to <= from {
		return 0, 0
	}
	var bytes int64
	errs := 0
	for _, r := range res {
		if r.Recovery == nil {
			continue
		}
		for _, op := range r.Recovery.Ops {
			if op.EndNS >= from && op.EndNS < to {
				bytes += op.Bytes
				if op.Err != "" {
					errs++
				}
			}
		}
	}
	return float64(bytes) / (float64(to-from) / 1e9) / 1e6, errs
}

// Targets lists each target of issue 15 with whether the run met it.
func (r *RecoveryReport) Targets() []Target {
	var out []Target
	if len(r.Phases) > 0 {
		p := r.Phases[0]
		out = append(out, Target{Name: "clone rate, one killed", Want: fmt.Sprintf("≥ %.0f %% of %.3f MB/s", 100*cloneTarget, p.Limit),
			Got: fmt.Sprintf("%.3f MB/s = %.1f %%", p.CloneMBps, 100*p.Efficiency), Met: p.Efficiency >= cloneTarget})
	}
	if len(r.Phases) > 1 {
		p := r.Phases[1]
		out = append(out, Target{Name: "one-replica chunks healed, two killed", Want: fmt.Sprintf("≤ %.0f× their %.1f s at the limit", oneTarget, p.OneTransferS),
			Got: fmt.Sprintf("%.1f s after detection = %.2f×", p.OneHealedS-p.DetectedS, p.OneFactor), Met: p.OneFactor <= oneTarget})
	}
	for _, c := range r.Clients {
		for i, d := range c.During {
			ratio := 0.0
			if c.Before > 0 {
				ratio = d / c.Before
			}
			out = append(out, Target{Name: fmt.Sprintf("%s during recovery %d", c.Kind, i+1), Want: fmt.Sprintf("≥ %.0f %% of %.3f MB/s", 100*clientTarget, c.Before),
				Got: fmt.Sprintf("%.3f MB/s = %.0f %%", d, 100*ratio), Met: ratio >= clientTarget})
		}
	}
	return out
}

// sourcesLabel is p.Sources, or "-" when the watcher did not say.
func sourcesLabel(p RecoveryPhase) string {
	if p.Sources == 0 {
		return "-"
	}
	return fmt.Sprint(p.Sources)
}

// Target is one of the run's targets.
type Target struct {
	Name, Want, Got string
	Met             bool
}

// WriteTable prints the report: the setup, one row a failure, the clients'
// rates, the targets and the paper's figures.
func (r *RecoveryReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "chunkfs bench recovery: %d chunkservers, %d replicas, NICs %g Mbit/s (scale %g of the paper), %s chunks\n",
		r.Servers, r.Replicas, r.NICMbit, r.Scale, chunkLabel(r.ChunkSize))
	fmt.Fprintf(w, "throttles: clone rate %s per target server, %s per source, %d clone streams, master %d clones per server; dead after %gs, heartbeat %gs\n",
		cloneRateLabel(r.CloneRate), cloneRateLabel(r.SourceRate), r.CloneStreams, r.MaxClones, r.DeadAfter, r.Heartbeat)
	fmt.Fprintf(w, "fill: %.0f MB in %d files; %s\n", float64(r.FillBytes)/1e6, r.FillBytes/max(r.FileBytes, 1), r.Fill)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "failure\tsurvivors\tsources\tlost MB\tchunks at 1 / 2\tdetected s\t1-replica healed s\tfill healed s\tall healed s\tclones\tclone MB/s\tlimit MB/s\tof limit\t1-replica MB\tat limit s\thealing / transfer\t")
	for i, p := range r.Phases {
		fmt.Fprintf(tw, "%d killed\t%d\t%s\t%.1f\t%d / %d\t%.1f\t%.1f\t%.1f\t%s\t%d\t%.3f\t%.3f\t%.1f%%\t%.1f\t%.1f\t%s\t\n",
			[]int{1, 2}[min(i, 1)], p.Survivors, sourcesLabel(p), float64(p.LostBytes)/1e6, p.OneReplica, p.TwoReplicas, p.DetectedS, p.OneHealedS, p.FillHealedS, healedLabel(p),
			p.Repaired, p.CloneMBps, p.Limit, 100*p.Efficiency, float64(p.OneReplicaBytes)/1e6, p.OneTransferS, factorLabel(p))
	}
	fmt.Fprintln(w, "sources: the survivors holding a replica of a chunk short of replicas at the detection; limit: what their NICs send and the survivors pull")
	fmt.Fprintln(w, "times in seconds from the kill; clone MB/s: clones completed from detection to the fill healed × chunk size, over that time;")
	fmt.Fprintln(w, "at limit s: the one-replica chunks' bytes at the limit, or at their busiest holder's NIC if longer (each has one source);")
	fmt.Fprintln(w, "healing / transfer: of every chunk, and of the fill's alone (a writer's chunk waits for its lease to end)")
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Clients) > 0 {
		fmt.Fprintln(tw, "clients\tbefore MB/s\t"+strings.Repeat("during recovery MB/s\tof before\tfailed ops\t", len(r.Phases)))
		for _, c := range r.Clients {
			fmt.Fprintf(tw, "%s (%d)\t%.3f\t", c.Kind, c.Clients, c.Before)
			for i, d := range c.During {
				fmt.Fprintf(tw, "%.3f\t%s\t%d\t", d, percentOf(d, c.Before), c.Errors[i])
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		r.writeCeilings(w)
	}
	for _, t := range r.Targets() {
		verdict := "met"
		if !t.Met {
			verdict = "NOT MET"
		}
		fmt.Fprintf(w, "target %s: want %s, got %s: %s\n", t.Name, t.Want, t.Got, verdict)
	}
	_, err := fmt.Fprintln(w, "GFS (paper §6.2.5): one chunkserver killed, 15,000 chunks (600 GB) restored in 23.2 min at 440 MB/s; two killed, 266 one-replica chunks back to two within 2 min.")
	return err
}

// writeCeilings prints the readers' rates against their ceilings.
func (r *RecoveryReport) writeCeilings(w io.Writer) {
	for _, c := range r.Clients {
		if len(c.Ceiling) != len(c.During)+1 {
			continue
		}
		fmt.Fprintf(w, "%s against the most the NICs left them (own NICs; the live servers' less clones and chain hops): before %s of %.3f MB/s",
			c.Kind, percentOf(c.Before, c.Ceiling[0]), c.Ceiling[0])
		for i, d := range c.During {
			fmt.Fprintf(w, "; recovery %d %s of %.3f", i+1, percentOf(d, c.Ceiling[i+1]), c.Ceiling[i+1])
		}
		fmt.Fprintln(w)
	}
}

// percentOf is x as a percentage of ref, or "-" without a reference.
func percentOf(x, ref float64) string {
	if ref <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*x/ref)
}

// healedLabel is the time to full health, or "> t" when the watch ended
// before it.
func healedLabel(p RecoveryPhase) string {
	if !p.Healed {
		return fmt.Sprintf("> %.1f", p.HealedS)
	}
	return fmt.Sprintf("%.1f", p.HealedS)
}

func factorLabel(p RecoveryPhase) string {
	if p.OneReplica == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f× (fill %.2f×)", p.OneFactor, p.FillOneFactor)
}

func cloneRateLabel(b int64) string {
	if b == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%.3f MB/s", float64(b)/1e6)
}

// WriteJSON writes the whole report, samples included.
func (r *RecoveryReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// SaveFiles writes recovery.txt and the figure (recovery.png,
// recovery.svg) into dir, and with events recovery.json too (the whole
// report, every sample included), and returns their paths.
func (r *RecoveryReport) SaveFiles(dir string, events bool) ([]string, error) {
	outs := []output{{"recovery.txt", r.WriteTable}, {"recovery.png", r.WritePNG}, {"recovery.svg", r.WriteSVG}}
	if events {
		outs = append(outs, output{"recovery.json", r.WriteJSON})
	}
	return saveOutputs(dir, outs)
}
