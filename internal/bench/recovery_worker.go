package bench

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/chunkfs/chunkfs/client"
)

// The worker tasks of bench recovery.
const (
	// OpWatch samples the master's view of replication every
	// Watch.Interval until the cluster has Watch.Live live chunkservers
	// and every chunk is back to min(Watch.Replicas, Watch.Live) replicas.
	OpWatch Op = "watch"
	// OpReadLoad reads random IOSize regions of Files until stopped.
	OpReadLoad Op = "read-load"
	// OpWriteLoad writes new files of Bytes under directory Path, in
	// IOSize writes, until stopped.
	OpWriteLoad Op = "write-load"
)

// WatchSpec is what an OpWatch task watches for.
type WatchSpec struct {
	Live     int           `json:"live"`     // live chunkservers to wait for
	Replicas int           `json:"replicas"` // the files' replication
	Dirs     []string      `json:"dirs"`     // directories whose files are watched besides Task.Files
	Interval time.Duration `json:"interval"`
	// For is the longest the watch goes on: then it ends with what it
	// saw, the recovery incomplete.
	For time.Duration `json:"for"`
}

// RecoveryResult is what the recovery tasks report besides Result's counts.
type RecoveryResult struct {
	Samples []ReplicaSample `json:"samples,omitempty"` // OpWatch
	Ops     []OpDone        `json:"ops,omitempty"`     // the load tasks, at most maxLoadOps
}

// OpDone is one operation of a load task: when it ended and what it moved.
type OpDone struct {
	EndNS int64  `json:"end_ns"`
	Bytes int64  `json:"bytes"`
	Err   string `json:"err,omitempty"`
}

// ReplicaSample is the master's view of replication at one moment.
type ReplicaSample struct {
	AtNS int64 `json:"at_ns"`
	Live int   `json:"live"` // live chunkservers
	// ByReplicas[k] is how many of the watched chunks have k live
	// replicas (the last entry: k or more); OneReplicaBytes is the bytes
	// of those with exactly one.
	ByReplicas      []int `json:"by_replicas"`
	OneReplicaBytes int64 `json:"one_replica_bytes"`
	// OneReplicaOn is those bytes by the address of the one holder: the
	// only source each of them can be cloned from.
	OneReplicaOn map[string]int64 `json:"one_replica_on,omitempty"`
	// ShortOn is the bytes of the chunks with fewer than the replication's
	// live replicas by the address of each holder: the servers that can
	// be their clone sources.
	ShortOn map[string]int64 `json:"short_on,omitempty"`
	// FillByReplicas counts Task.Files' chunks alone: data written before
	// the failure, under no lease.
	FillByReplicas []int `json:"fill_by_replicas"`
	// The cluster report's repair counters, over every chunk.
	UnderReplicated int64   `json:"under_replicated"`
	BeingCloned     int64   `json:"being_cloned"`
	Missing         int64   `json:"missing"`
	Repaired        int64   `json:"repaired"`
	RepairRate      float64 `json:"repair_rate"`
	// Used is the chunk bytes each chunkserver holds, by address, and
	// Alive whether the master deems it alive.
	Used  map[string]int64 `json:"used"`
	Alive map[string]bool  `json:"alive"`
	Err   string           `json:"err,omitempty"` // a sample the master did not answer
}

// healed reports whether s shows live chunkservers alive and every chunk at
// min(replicas, live) live replicas or more.
func (s ReplicaSample) healed(live, replicas int) bool {
	if s.Err != "" || s.Live != live || s.UnderReplicated > 0 && live >= replicas || s.BeingCloned > 0 || s.Missing > 0 {
		return false
	}
	return atLeast(s.ByReplicas, min(replicas, live))
}

// atLeast reports whether no chunk counted in byReplicas has fewer than k
// replicas.
func atLeast(byReplicas []int, k int) bool {
	for i, n := range byReplicas {
		if i < k && n > 0 {
			return false
		}
	}
	return true
}

// maxLoadOps bounds RecoveryResult.Ops.
const maxLoadOps = 1 << 17

// setupRecoveryTask sets up the tasks above.
func setupRecoveryTask(ctx context.Context, sec *client.Security, t Task) (runner, error) {
	cfg := client.DefaultConfig()
	cfg.Master, cfg.Security = t.Master, sec
	if t.IOSize > 0 {
		cfg.WriteBuffer = int(t.IOSize)
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var r runner
	switch {
	case t.Op == OpWatch && t.Watch != nil:
		r = &watchTask{c: c, files: t.Files, spec: *t.Watch}
	case t.Op == OpReadLoad && t.IOSize > 0 && len(t.Files) > 0:
		r, err = newReadLoad(ctx, c, t)
	case t.Op == OpWriteLoad && t.IOSize > 0 && t.Bytes >= t.IOSize && t.Path != "":
		err = c.MkdirAll(ctx, t.Path, 0o755)
		r = &writeLoad{c: c, dir: t.Path, size: t.Bytes, buf: payload(t.IOSize, uint64(t.Seed))}
	default:
		err = fmt.Errorf("task %s: missing watch spec, files, path or sizes", t.Op)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return r, nil
}

// watchTask is OpWatch.
type watchTask struct {
	c       *client.Client
	files   []string
	spec    WatchSpec
	samples []ReplicaSample
}

func (w *watchTask) close() error { return w.c.Close() }

func (w *watchTask) run(ctx context.Context) (Result, error) {
	res, err := timed(func() (int64, int64, error) {
		t := time.NewTicker(w.spec.Interval)
		defer t.Stop()
		end := time.After(w.spec.For)
		for n := int64(1); ; n++ {
			s := w.sample(ctx)
			w.samples = append(w.samples, s)
			if s.healed(w.spec.Live, w.spec.Replicas) {
				return 0, n, nil
			}
			select {
			case <-ctx.Done():
				return 0, n, ctx.Err()
			case <-end:
				return 0, n, nil
			case <-t.C:
			}
		}
	})
	res.Recovery = &RecoveryResult{Samples: w.samples}
	return res, err
}

// sample asks the master for its report and where every watched chunk is.
func (w *watchTask) sample(ctx context.Context) ReplicaSample {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s := ReplicaSample{AtNS: time.Now().UnixNano(), ByReplicas: make([]int, w.spec.Replicas+1), FillByReplicas: make([]int, w.spec.Replicas+1),
		Used: map[string]int64{}, Alive: map[string]bool{}}
	if err := w.fill(ctx, &s); err != nil {
		s.Err = err.Error()
	}
	return s
}

func (w *watchTask) fill(ctx context.Context, s *ReplicaSample) error {
	rep, err := w.c.ClusterReport(ctx)
	if err != nil {
		return err
	}
	s.UnderReplicated, s.BeingCloned, s.Missing, s.Repaired, s.RepairRate = rep.UnderReplicated, rep.BeingCloned, rep.Missing, rep.Repaired, rep.RepairRate
	for _, sv := range rep.Servers {
		s.Used[sv.Addr], s.Alive[sv.Addr] = sv.Used, sv.Alive
		if sv.Alive {
			s.Live++
		}
	}
	files, err := w.watched(ctx)
	if err != nil {
		return err
	}
	for i, f := range files {
		if err := w.count(ctx, f, rep.ChunkSize, s, i < len(w.files)); err != nil {
			return err
		}
	}
	return nil
}

// watched lists Files and the files in Dirs (one level down, and one
// more for each subdirectory).
func (w *watchTask) watched(ctx context.Context) ([]string, error) {
	files := append([]string(nil), w.files...)
	dirs := append([]string(nil), w.spec.Dirs...)
	for len(dirs) > 0 {
		d := dirs[0]
		dirs = dirs[1:]
		ents, err := w.c.ReadDir(ctx, d)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, path.Join(d, e.Name()))
			} else {
				files = append(files, path.Join(d, e.Name()))
			}
		}
	}
	return files, nil
}

// count adds the chunks of file f to s by their live replicas, and to the
// fill's counts too if fill is set.
func (w *watchTask) count(ctx context.Context, f string, chunkSize int64, s *ReplicaSample, fill bool) error {
	chunks, err := w.c.Chunks(ctx, f)
	if err != nil {
		return err
	}
	fi, err := w.c.Stat(ctx, f)
	if err != nil {
		return err
	}
	for _, ch := range chunks {
		n := min(max(fi.Length-ch.Index*chunkSize, 0), chunkSize)
		if n == 0 {
			continue // a chunk being created holds nothing yet
		}
		k := min(len(ch.Replicas), len(s.ByReplicas)-1)
		s.ByReplicas[k]++
		if fill {
			s.FillByReplicas[k]++
		}
		if k < w.spec.Replicas {
			if s.ShortOn == nil {
				s.ShortOn = map[string]int64{}
			}
			for _, r := range ch.Replicas {
				s.ShortOn[r] += n
			}
		}
		if k == 1 {
			s.OneReplicaBytes += n
			if s.OneReplicaOn == nil {
				s.OneReplicaOn = map[string]int64{}
			}
			s.OneReplicaOn[ch.Replicas[0]] += n
		}
	}
	return nil
}

// loadOps records a load task's operations.
type loadOps []OpDone

func (l *loadOps) done(n int, err error) {
	if len(*l) >= maxLoadOps {
		return
	}
	op := OpDone{EndNS: time.Now().UnixNano(), Bytes: int64(n)}
	if err != nil {
		op.Err = err.Error()
	}
	*l = append(*l, op)
}

// runLoad runs op until ctx ends; an operation that fails is recorded and
// followed by a short pause, and the load goes on.
func runLoad(ctx context.Context, op func(ctx context.Context) (int, error)) (Result, error) {
	var ops loadOps
	res, _ := timed(func() (int64, int64, error) {
		var total int64
		for ctx.Err() == nil {
			n, err := op(ctx)
			if ctx.Err() != nil {
				break // an operation cut short by the stop is not counted
			}
			ops.done(n, err)
			total += int64(n)
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
		return total, int64(len(ops)), nil
	})
	res.Recovery = &RecoveryResult{Ops: ops}
	return res, nil
}

// readLoad is OpReadLoad.
type readLoad struct {
	r   *readTask
	buf []byte
}

func newReadLoad(ctx context.Context, c *client.Client, t Task) (*readLoad, error) {
	t.Bytes = 0
	r, err := newReadTask(ctx, c, t, nil)
	if err != nil {
		return nil, err
	}
	return &readLoad{r: r, buf: make([]byte, t.IOSize)}, nil
}

func (l *readLoad) run(ctx context.Context) (Result, error) {
	return runLoad(ctx, func(ctx context.Context) (int, error) {
		i := l.r.rng.IntN(len(l.r.files))
		off := l.r.rng.Int64N(l.r.sizes[i]/l.r.io) * l.r.io
		return l.r.files[i].ReadAt(l.buf, off)
	})
}

func (l *readLoad) close() error { return l.r.close() }

// writeLoad is OpWriteLoad: one file after another, each closed (its data
// durable on every replica) before the next is begun.
type writeLoad struct {
	c    *client.Client
	dir  string
	size int64
	buf  []byte
	f    *client.File
	n    int64 // bytes written to f
	seq  int
}

func (l *writeLoad) run(ctx context.Context) (Result, error) {
	return runLoad(ctx, l.write)
}

// write makes one write, to a new file when the last is full or failed.
func (l *writeLoad) write(ctx context.Context) (int, error) {
	if l.f == nil {
		f, err := l.c.Create(ctx, path.Join(l.dir, fmt.Sprintf("f%04d", l.seq)))
		l.seq++
		if err != nil {
			return 0, err
		}
		l.f, l.n = f, 0
	}
	k, err := l.f.Write(l.buf[:min(int64(len(l.buf)), l.size-l.n)])
	l.n += int64(k)
	if err == nil && l.n < l.size {
		return k, nil
	}
	cerr := l.f.Close()
	l.f = nil
	return k, errors.Join(err, cerr)
}

func (l *writeLoad) close() error {
	var err error
	if l.f != nil {
		err = l.f.Close()
	}
	return errors.Join(err, l.c.Close())
}
