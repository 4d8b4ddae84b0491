package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/chunkfs/chunkfs/client"
)

// The probe times each step of one client's write and record append on an
// otherwise idle testbed, through the client library: a Trace reports each
// attempt's steps (the lease, the push along the chain, the mutation at the
// primary), and what the whole operation took beyond its attempt is the
// length commit at the master. So a shortfall of the workloads can be
// traced to the step that costs it. It also writes the same data to files
// of one and two replicas: the difference of their pushes from the full
// chain's is what the pipelined forwarding costs.

// Phase names, in the order they happen.
const (
	phasePrepare = "prepare (master)"
	phasePush1   = "push to 1 replica"
	phasePush2   = "push to 2 replicas"
	phaseReserve = "reserve (primary)"
	phasePush    = "push along the chain"
	phaseWrite   = "write (primary+secondaries)"
	phaseAppend  = "append (primary+secondaries)"
	phaseCommit  = "commit length (master)"
)

// probeTask runs rounds of each step with io bytes of data, on a client
// without a write buffer (each Write is one mutation and its commit).
type probeTask struct {
	c      *client.Client
	trace  *traceRecorder // the client's; its events are not reported
	path   string
	io     int64
	rounds int
	files  [3]*client.File // path with 1, 2 and the cluster's replicas
	log    *client.File    // path.log, appended to
}

// newProbeTask creates the probe's files on c, whose Trace is trace.
func newProbeTask(ctx context.Context, c *client.Client, trace *traceRecorder, path string, io int64, rounds int) (*probeTask, error) {
	if max := int64(c.MaxRecord() + client.RecordHeaderSize); io <= client.RecordHeaderSize || io > max {
		return nil, fmt.Errorf("probe: %d-byte operations cannot be framed records (%d-%d bytes)", io, client.RecordHeaderSize+1, max)
	}
	p := &probeTask{c: c, trace: trace, path: path, io: io, rounds: rounds}
	names := []string{path + ".r1", path + ".r2", path}
	for i, name := range names {
		f, err := c.OpenFileWith(ctx, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666, client.CreateOptions{Replication: i + 1})
		if err != nil {
			p.closeFiles()
			return nil, err
		}
		p.files[i] = f
	}
	f, err := c.OpenFile(ctx, path+".log", os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		p.closeFiles()
		return nil, err
	}
	p.log = f
	return p, nil
}

func (p *probeTask) close() error { return errors.Join(p.closeFiles(), p.c.Close()) }

func (p *probeTask) closeFiles() error {
	var errs []error
	for _, f := range append(p.files[:], p.log) {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

func (p *probeTask) run(ctx context.Context) (Result, error) {
	buf := payload(p.io, 4)
	phases := map[string][]float64{}
	p.trace.take() // the set-up's
	start := time.Now()
	for i := range p.rounds {
		if err := p.round(phases, buf, int64(i)*p.io); err != nil {
			return Result{}, err
		}
	}
	return Result{Bytes: int64(4*p.rounds) * p.io, Ops: int64(4 * p.rounds), StartNS: start.UnixNano(),
		EndNS: time.Now().UnixNano(), PhasesMS: medians(phases)}, nil
}

// round writes buf at off of each of the probe's files and appends it (less
// its frame) as a record, adding each step's time to phases.
func (p *probeTask) round(phases map[string][]float64, buf []byte, off int64) error {
	add := func(name string, v float64) { phases[name] = append(phases[name], v) }
	for i, f := range p.files {
		t := time.Now()
		if _, err := f.WriteAt(buf, off); err != nil {
			return fmt.Errorf("probe: write %s: %w", f.Name(), err)
		}
		a, err := p.attempt("write: attempt", time.Since(t))
		if err != nil {
			return err
		}
		switch i {
		case 0:
			add(phasePush1, a.Steps["push"])
		case 1:
			add(phasePush2, a.Steps["push"])
		default:
			add(phasePrepare, a.Steps["prepare"])
			add(phasePush, a.Steps["push"])
			add(phaseWrite, a.Steps["write"])
			add(phaseCommit, a.rest)
		}
	}
	t := time.Now()
	if _, err := p.log.Append(buf[:p.io-client.RecordHeaderSize]); err != nil {
		return fmt.Errorf("probe: append to %s: %w", p.log.Name(), err)
	}
	a, err := p.attempt("append: attempt", time.Since(t))
	if err != nil {
		return err
	}
	add(phaseReserve, a.Steps["reserve"])
	add(phaseAppend, a.Steps["append"])
	add(phaseCommit, a.rest)
	return nil
}

// probed is the attempt that carried an operation, and the time the
// operation took beyond it (its length commit at the master).
type probed struct {
	Event
	rest float64
}

// attempt returns the last successful attempt named what that the trace
// reported since the previous call, for an operation that took took.
func (p *probeTask) attempt(what string, took time.Duration) (probed, error) {
	ev := p.trace.take()
	for i := len(ev) - 1; i >= 0; i-- {
		if ev[i].What == what && ev[i].Err == "" {
			return probed{Event: ev[i], rest: max(durMS(took)-ev[i].MS, 0)}, nil
		}
	}
	return probed{}, fmt.Errorf("probe: the client's trace reported no successful %s", what)
}

// medians returns each phase's median time in milliseconds.
func medians(phases map[string][]float64) map[string]float64 {
	out := make(map[string]float64, len(phases))
	for k, v := range phases {
		sort.Float64s(v)
		out[k] = v[len(v)/2]
	}
	return out
}

// Probe is the probe's outcome: the median time of each step for one
// operation of Bytes bytes, beside the time its bytes take on the wire at
// the NIC rate.
type Probe struct {
	Bytes    int64              `json:"bytes"`
	WireMS   float64            `json:"wire_ms"`
	PhasesMS map[string]float64 `json:"phases_ms"`
}

// String lays the probe out as one line per operation.
func (p *Probe) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "one client, idle testbed, %d-byte operations (%.0f ms on the wire at the NIC rate), median ms per step:\n", p.Bytes, p.WireMS)
	line := func(name string, phases ...string) {
		fmt.Fprintf(&b, "  %-7s", name)
		total := 0.0
		for _, ph := range phases {
			fmt.Fprintf(&b, "  %s %.0f", ph, p.PhasesMS[ph])
			total += p.PhasesMS[ph]
		}
		fmt.Fprintf(&b, "  = %.0f ms → at most %.0f%% of the NIC\n", total, 100*p.WireMS/total)
	}
	line("write", phasePrepare, phasePush, phaseWrite, phaseCommit)
	line("append", phasePrepare, phaseReserve, phasePush, phaseAppend, phaseCommit)
	fmt.Fprintf(&b, "  push to 1 replica %.0f ms, to 2 %.0f ms, to 3 %.0f ms: each hop of the chain adds %.0f ms\n",
		p.PhasesMS[phasePush1], p.PhasesMS[phasePush2], p.PhasesMS[phasePush], (p.PhasesMS[phasePush]-p.PhasesMS[phasePush1])/2)
	return b.String()
}
