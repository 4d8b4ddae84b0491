package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// The probe times each step of one client's write and record append on an
// otherwise idle testbed, doing what the client library does step by step
// (master look-up, push along the chain, the mutation at the primary, the
// length commit at the master), so that a shortfall of the workloads can be
// traced to the step that costs it. It also pushes the same data to one
// replica only: the difference from the full chain is what the pipelined
// forwarding costs.

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

// probeTask runs Ops rounds of each step with IOSize of data.
type probeTask struct {
	c      *client.Client
	sec    *rpc.Security
	master string
	path   string
	io     int64
	rounds int
}

func (p *probeTask) close() error { return p.c.Close() }

func (p *probeTask) run(ctx context.Context) (Result, error) {
	pool, data := p.sec.NewPool(), p.sec.NewDataClient()
	defer pool.Close()
	defer data.Close()
	m, err := pool.Master(p.master)
	if err != nil {
		return Result{}, err
	}
	pr := &prober{m: m, pool: pool, data: data, buf: payload(p.io, 4), phases: map[string][]float64{}}
	start := time.Now()
	for i := range p.rounds {
		if err := pr.round(ctx, p.path, int64(i)*p.io, false); err != nil {
			return Result{}, err
		}
		if err := pr.round(ctx, p.path+".log", 0, true); err != nil {
			return Result{}, err
		}
	}
	return Result{Bytes: int64(2*p.rounds) * p.io, Ops: int64(2 * p.rounds), StartNS: start.UnixNano(),
		EndNS: time.Now().UnixNano(), PhasesMS: pr.medians()}, nil
}

// prober holds the connections and the timings of a probe.
type prober struct {
	m      pb.MasterClient
	pool   *rpc.Pool
	data   *rpc.DataClient
	buf    []byte
	phases map[string][]float64 // milliseconds, one entry a round
}

func (pr *prober) time(phase string, f func() error) error {
	t := time.Now()
	err := f()
	pr.phases[phase] = append(pr.phases[phase], float64(time.Since(t).Microseconds())/1000)
	if err != nil {
		return fmt.Errorf("probe %s: %w", phase, err)
	}
	return nil
}

// round does one write at off of path (or one record append to it).
func (pr *prober) round(ctx context.Context, path string, off int64, appending bool) error {
	caller := &pb.Caller{Uid: chunkfs.Root.UID, Gids: chunkfs.Root.GIDs}
	var loc *pb.ChunkLocation
	var chunkSize int64
	err := pr.time(phasePrepare, func() error {
		resp, err := pr.m.PrepareWrite(ctx, &pb.PrepareWriteRequest{Caller: caller, Path: path, Index: 0, Append: appending})
		if err == nil {
			loc, chunkSize = resp.Chunk, resp.ChunkSize
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := pr.time(phasePush1, func() error {
		return pr.data.Push(ctx, loc.Replicas[:1], chunkfs.DataID(rand.Uint64()), pr.buf)
	}); err != nil {
		return err
	}
	if len(loc.Replicas) > 2 {
		if err := pr.time(phasePush2, func() error {
			return pr.data.Push(ctx, loc.Replicas[:2], chunkfs.DataID(rand.Uint64()), pr.buf)
		}); err != nil {
			return err
		}
	}
	cs, err := pr.pool.ChunkServer(loc.Primary)
	if err != nil {
		return err
	}
	var secondaries []string
	for _, a := range loc.Replicas {
		if a != loc.Primary {
			secondaries = append(secondaries, a)
		}
	}
	n := int64(len(pr.buf))
	id := chunkfs.DataID(rand.Uint64())
	if appending && n >= client.ReserveMin {
		if err := pr.time(phaseReserve, func() error {
			_, err := cs.Reserve(ctx, &pb.ReserveRequest{Handle: loc.Handle, Version: loc.Version, DataId: uint64(id),
				Length: n, Secondaries: secondaries, ChunkSize: chunkSize})
			return err
		}); err != nil {
			return err
		}
	}
	if err := pr.time(phasePush, func() error { return pr.data.Push(ctx, loc.Replicas, id, pr.buf) }); err != nil {
		return err
	}
	if appending {
		err = pr.time(phaseAppend, func() error {
			resp, err := cs.Append(ctx, &pb.AppendRequest{Handle: loc.Handle, Version: loc.Version, DataId: uint64(id),
				Length: n, Secondaries: secondaries, ChunkSize: chunkSize})
			if err == nil {
				off = resp.Offset
			}
			return err
		})
	} else {
		err = pr.time(phaseWrite, func() error {
			_, err := cs.Write(ctx, &pb.WriteRequest{Handle: loc.Handle, Version: loc.Version, Offset: off,
				DataId: uint64(id), Length: n, Secondaries: secondaries})
			return err
		})
	}
	if err != nil {
		return err
	}
	return pr.time(phaseCommit, func() error {
		_, err := pr.m.CommitLength(ctx, &pb.CommitLengthRequest{Caller: caller, Path: path, Length: off + n, Touch: true})
		return err
	})
}

// medians returns each phase's median time in milliseconds.
func (pr *prober) medians() map[string]float64 {
	out := make(map[string]float64, len(pr.phases))
	for k, v := range pr.phases {
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
