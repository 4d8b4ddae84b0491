package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/chunkfs/chunkfs/client"
)

// MetaLoad is the observer-reads load generator's task (OpMeta): Clients
// clients, the first ObserverClients of which send their reads to the
// group's observers and the rest to the leader (client.Config.LeaderReads),
// issue Rate operations a second in all, drawn from Mix, for Duration:
// open loop, operation i due at i/Rate whatever became of the earlier ones,
// each timed from when it was issued; how late the generator issued them is
// reported apart (MetaResult.Late). Operation i is client i mod Clients's.
type MetaLoad struct {
	Clients         int           `json:"clients"`
	ObserverClients int           `json:"observer_clients"`
	Observers       int           `json:"observers"` // observers to wait for before starting
	Rate            float64       `json:"rate"`
	Duration        time.Duration `json:"duration"`
	Mix             Mix           `json:"mix"`
	Seed            uint64        `json:"seed"`
	MaxInFlight     int           `json:"max_in_flight"` // operations beyond are shed (counted, not run)
	InitialNames    int           `json:"initial_names"` // files each client creates before the run
	ReadSetFiles    int           `json:"read_set_files"`
}

// MetaResult is what the load generator measured.
type MetaResult struct {
	Ops        int64    `json:"ops"`    // operations acknowledged
	Errors     int64    `json:"errors"` // operations that failed
	Shed       int64    `json:"shed"`   // operations not run: MaxInFlight were in flight
	Seconds    float64  `json:"seconds"`
	OpsPerSec  float64  `json:"ops_per_sec"`
	Reads      Latency  `json:"reads"`
	Writes     Latency  `json:"writes"`
	Violations int64    `json:"violations"`         // reads that missed the client's own acknowledged writes
	Examples   []string `json:"examples,omitempty"` // the first violations and errors
	// CPUSeconds is the generator's own CPU time during the run; Late how
	// late it issued its operations (included in their latencies).
	CPUSeconds float64 `json:"cpu_seconds"`
	Late       Latency `json:"late"`
	Leader     string  `json:"leader"` // the leader's address at the end
}

// Latency summarises operation times.
type Latency struct {
	N      int64   `json:"n"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
}

// summarize returns the latency summary of ms (sorted in place).
func summarize(ms []float64) Latency {
	if len(ms) == 0 {
		return Latency{}
	}
	slices.Sort(ms)
	sum := 0.0
	for _, v := range ms {
		sum += v
	}
	q := func(f float64) float64 { return ms[min(int(f*float64(len(ms))), len(ms)-1)] }
	return Latency{N: int64(len(ms)), MeanMS: sum / float64(len(ms)), P50MS: q(0.5), P90MS: q(0.9), P99MS: q(0.99)}
}

// The workload's directories.
const (
	metaRoot    = "/obs"
	metaReadSet = "/obs/readset"
)

func metaClientDir(i int) string { return path.Join(metaRoot, fmt.Sprintf("c%03d", i)) }

// metaLoadTask is a set-up MetaLoad.
type metaLoadTask struct {
	load    MetaLoad
	clients []*client.Client
	models  []*nameModel
	mus     []sync.Mutex // mus[i] guards models[i]
	files   []string     // the read set

	mu       sync.Mutex // guards reads, writes, errors, examples, violations
	reads    []float64
	writes   []float64
	errs     int64
	viol     int64
	examples []string
}

// maxExamples bounds MetaResult.Examples.
const maxExamples = 8

func setupMetaLoad(ctx context.Context, masters string, l MetaLoad) (*metaLoadTask, error) {
	t := &metaLoadTask{load: l, models: make([]*nameModel, l.Clients), mus: make([]sync.Mutex, l.Clients)}
	if err := waitGroup(ctx, masters, l.Observers); err != nil {
		return nil, err
	}
	for i := range l.Clients {
		cfg := client.DefaultConfig()
		cfg.Master, cfg.LeaderReads, cfg.MetaBatch = masters, i >= l.ObserverClients, 1
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		c, err := client.New(ctx, cfg)
		if err != nil {
			t.close()
			return nil, err
		}
		t.clients = append(t.clients, c)
		t.models[i] = newNameModel()
	}
	if err := t.prepare(ctx); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// waitGroup waits until the group has a leader that knows observers
// observers, and a live chunkserver.
func waitGroup(ctx context.Context, masters string, observers int) error {
	cfg := client.DefaultConfig()
	cfg.Master, cfg.LeaderReads = masters, true
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		if last = groupReady(ctx, cfg, observers); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the group of masters: %w", errors.Join(last, ctx.Err()))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func groupReady(ctx context.Context, cfg client.Config, observers int) error {
	c, err := client.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.HAStatus(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, m := range st.Members {
		if !m.Voter {
			n++
		}
	}
	if st.Role != "leader" || n < observers {
		return fmt.Errorf("master %s is %s and knows %d observers", st.ID, st.Role, n)
	}
	lcfg := cfg
	lcfg.Master = st.LeaderAddr
	lc, err := client.New(ctx, lcfg)
	if err != nil {
		return err
	}
	defer lc.Close()
	if live, err := liveServers(ctx, lc); err != nil || live == 0 {
		return fmt.Errorf("no live chunkserver yet (%v)", err)
	}
	return nil
}

// metaReadSetSize is the size of each read-set file: one chunk.
const metaReadSetSize = 64 << 10

// prepare makes the read set and each client's directory and first names,
// then waits for the observers to learn the read set's chunk locations
// from the chunkservers' heartbeats.
func (t *metaLoadTask) prepare(ctx context.Context) error {
	c0 := t.clients[0]
	if err := c0.MkdirAll(ctx, metaReadSet, 0o755); err != nil {
		return err
	}
	buf := payload(metaReadSetSize, 7)
	for i := range t.load.ReadSetFiles {
		p := path.Join(metaReadSet, fmt.Sprintf("f%03d", i))
		if err := writeWhole(ctx, c0, p, buf); err != nil {
			return err
		}
		t.files = append(t.files, p)
	}
	for i, c := range t.clients {
		if err := c.Mkdir(ctx, metaClientDir(i), 0o755); err != nil {
			return err
		}
		m := t.models[i]
		for range t.load.InitialNames {
			p := m.plan(MetaCreate, nil)
			err := t.do(ctx, i, p)
			m.done(p, err == nil)
			if err != nil {
				return err
			}
		}
	}
	return sleepCtx(ctx, 2*metaHeartbeat+time.Second)
}

// metaHeartbeat is the chunkservers' heartbeat period in the observer
// benchmark, within which observers learn of new chunks.
const metaHeartbeat = time.Second

func writeWhole(ctx context.Context, c *client.Client, p string, data []byte) error {
	f, err := c.Create(ctx, p)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// do runs plan p of client i, returning what a read found in found.
func (t *metaLoadTask) do(ctx context.Context, i int, p metaPlan) error {
	_, err := t.exec(ctx, i, p)
	return err
}

// exec runs plan p of client i; for a stat or list it returns the names
// found.
func (t *metaLoadTask) exec(ctx context.Context, i int, p metaPlan) ([]string, error) {
	c, dir := t.clients[i], metaClientDir(i)
	full := path.Join(dir, p.Name)
	switch p.Op {
	case MetaStat:
		_, err := c.Stat(ctx, full)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return []string{p.Name}, err
	case MetaList:
		ents, err := c.ReadDir(ctx, dir)
		names := make([]string, len(ents))
		for j, e := range ents {
			names[j] = e.Name()
		}
		return names, err
	case MetaChunks:
		_, err := c.Chunks(ctx, t.files[rand.IntN(len(t.files))])
		return nil, err
	case MetaCreate:
		f, err := c.Create(ctx, full)
		if err != nil {
			return nil, err
		}
		return nil, f.Close()
	case MetaMkdir:
		return nil, c.Mkdir(ctx, full, 0o755)
	case MetaRename:
		return nil, c.Rename(ctx, full, path.Join(dir, p.To))
	case MetaDelete:
		return nil, c.Remove(ctx, full)
	}
	return nil, fmt.Errorf("unknown operation %q", p.Op)
}

// opTimeout bounds one operation of the run.
const opTimeout = 30 * time.Second

// runMeta issues the operations and waits for the last to end.
func (t *metaLoadTask) runMeta(ctx context.Context) (MetaResult, error) {
	l := t.load
	r := rand.New(rand.NewPCG(l.Seed, 1))
	n := int(math.Round(l.Rate * l.Duration.Seconds()))
	sem := make(chan struct{}, l.MaxInFlight)
	var wg sync.WaitGroup
	var res MetaResult
	cpu0 := cpuTime()
	start := time.Now()
	lates := make([]float64, 0, n)
	for k := 0; k < n && ctx.Err() == nil; k++ {
		due := start.Add(time.Duration(float64(k) / l.Rate * 1e9))
		if d := time.Until(due); d > 0 {
			sleepCtx(ctx, d)
		}
		lates = append(lates, float64(time.Since(due))/1e6)
		select {
		case sem <- struct{}{}:
		default:
			res.Shed++
			continue
		}
		i := k % l.Clients
		t.mus[i].Lock()
		p := t.models[i].plan(l.Mix.Pick(r.Float64()), r)
		t.mus[i].Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t.timeOne(ctx, i, p, time.Now())
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.CPUSeconds = cpuTime() - cpu0
	res.Late = summarize(lates)
	t.mu.Lock()
	defer t.mu.Unlock()
	res.Reads, res.Writes = summarize(t.reads), summarize(t.writes)
	res.Ops = res.Reads.N + res.Writes.N
	res.OpsPerSec = float64(res.Ops) / res.Seconds
	res.Errors, res.Violations, res.Examples = t.errs, t.viol, t.examples
	if st, err := t.clients[0].HAStatus(ctx); err == nil {
		res.Leader = st.LeaderAddr
	}
	return res, ctx.Err()
}

// timeOne runs p for client i, issued at start, and records it.
func (t *metaLoadTask) timeOne(ctx context.Context, i int, p metaPlan, start time.Time) {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	found, err := t.exec(octx, i, p)
	cancel()
	ms := float64(time.Since(start)) / 1e6
	var bad []string
	t.mus[i].Lock()
	if p.Op.IsRead() {
		if err == nil && p.Snapshot != nil {
			bad = t.models[i].check(p, found)
		}
	} else {
		t.models[i].done(p, err == nil)
	}
	t.mus[i].Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err != nil:
		t.errs++
		t.example(fmt.Sprintf("client %d %s: %v", i, p.Op, err))
		return
	case p.Op.IsRead():
		t.reads = append(t.reads, ms)
	default:
		t.writes = append(t.writes, ms)
	}
	t.viol += int64(len(bad))
	for _, b := range bad {
		t.example(fmt.Sprintf("client %d: %s", i, b))
	}
}

func (t *metaLoadTask) example(s string) {
	if len(t.examples) < maxExamples {
		t.examples = append(t.examples, s)
	}
}

func (t *metaLoadTask) run(ctx context.Context) (Result, error) {
	start := time.Now()
	mr, err := t.runMeta(ctx)
	return Result{Ops: mr.Ops, StartNS: start.UnixNano(), EndNS: time.Now().UnixNano(), Meta: &mr}, err
}

func (t *metaLoadTask) close() error {
	var errs []error
	for _, c := range t.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// cpuTime is the process's user and system CPU time so far, in seconds.
func cpuTime() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// validate checks a load decoded from the wire (nil: none given).
func (l *MetaLoad) validate() error {
	switch {
	case l == nil:
		return errors.New("meta task has no load")
	case l.Clients < 1 || l.Clients > 1000 || l.ObserverClients < 0 || l.ObserverClients > l.Clients:
		return fmt.Errorf("meta load: %d clients, %d reading from observers", l.Clients, l.ObserverClients)
	case l.Rate <= 0 || l.Rate > 1e6 || l.Duration <= 0 || l.Duration > 24*time.Hour:
		return fmt.Errorf("meta load: rate %g/s for %v out of range", l.Rate, l.Duration)
	case l.MaxInFlight < 1 || l.InitialNames < 0 || l.ReadSetFiles < 1:
		return errors.New("meta load: needs a positive in-flight bound and read set")
	}
	return l.Mix.Validate()
}
