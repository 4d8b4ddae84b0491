package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// NetPoint is what raw TCP achieves across the testbed: N streams at once,
// client i to chunkserver i (mod the chunkservers), each moving its share of
// min(N × NIC, link) for half a point's duration. It is the ceiling of the
// reads and writes figures: the shaping and TCP's own overhead, without
// chunkfs.
type NetPoint struct {
	Clients    int     `json:"clients"`
	Aggregate  float64 `json:"aggregate_mbps"`
	Limit      float64 `json:"limit_mbps"`
	Efficiency float64 `json:"efficiency"`
}

// calibratePort is where the calibration sinks listen.
const calibratePort = "7100"

// calibrate measures a NetPoint for every N of the run.
func (s *session) calibrate(ctx context.Context) ([]NetPoint, error) {
	k := min(len(s.tb.Chunkservers), len(s.tb.Clients))
	sinks, err := s.startSinks(s.tb.Chunkservers[:k])
	defer func() {
		for _, w := range sinks {
			w.kill()
		}
	}()
	if err != nil {
		return nil, err
	}
	var out []NetPoint
	for _, n := range s.cfg.Clients {
		p, err := s.calibrateN(ctx, n, k)
		if err != nil {
			return nil, fmt.Errorf("network calibration: %w", err)
		}
		s.log.Info("raw TCP across the testbed", "clients", n, "MB/s", fmt.Sprintf("%.3f", p.Aggregate), "efficiency", fmt.Sprintf("%.1f%%", 100*p.Efficiency))
		out = append(out, p)
	}
	return out, nil
}

func (s *session) startSinks(hosts []Host) ([]*workerProc, error) {
	var ws []*workerProc
	for i, h := range hosts {
		w, err := startWorker(s.cfg, h, Task{Op: OpSink, Addr: net.JoinHostPort(h.Addr.String(), calibratePort)}, s.dir, fmt.Sprintf("sink-%02d", i+1))
		if err != nil {
			return ws, err
		}
		ws = append(ws, w)
		m, err := w.next()
		if err == nil && !m.Ready {
			err = errors.New(w.label + ": expected ready")
		}
		if err == nil {
			_, err = fmt.Fprintln(w.in, "go")
		}
		if err != nil {
			return ws, err
		}
	}
	return ws, nil
}

// calibrateMax bounds how long each raw TCP measurement takes at its limit
// (half of Config.Duration, at most this): the streams are steady, and
// longer ones would only lengthen a default run.
const calibrateMax = 20 * time.Second

// calibrateN runs n TCP streams, client i to sink i mod k.
func (s *session) calibrateN(ctx context.Context, n, k int) (NetPoint, error) {
	limit := s.cfg.Network().Limit(Reads, n)
	bytes := int64(limit / float64(n) * 1e6 * min(s.cfg.Duration/2, calibrateMax).Seconds())
	tasks := make([]Task, n)
	for i := range tasks {
		addr := net.JoinHostPort(s.tb.Chunkservers[i%k].Addr.String(), calibratePort)
		tasks[i] = Task{Op: OpSource, Addr: addr, Bytes: bytes}
	}
	res, err := runWorkers(ctx, s.cfg, s.tb.Clients[:n], tasks, s.dir, fmt.Sprintf("tcp-n%02d", n))
	if err != nil {
		return NetPoint{}, err
	}
	p := Point{Workload: Reads, Clients: n, Limit: limit}
	p.measure(res)
	for _, r := range res {
		s.log.Debug("tcp stream", "start", r.StartNS-res[0].StartNS, "end", r.EndNS-res[0].StartNS, "bytes", r.Bytes)
	}
	return NetPoint{Clients: n, Aggregate: p.Aggregate, Limit: limit, Efficiency: p.Efficiency}, nil
}
