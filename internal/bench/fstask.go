package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"time"

	"github.com/chunkfs/chunkfs/client"
)

// setupTask prepares a task: connects, opens files, listens. Nothing it does
// is measured.
func setupTask(ctx context.Context, t Task) (runner, error) {
	switch t.Op {
	case OpSink:
		return newSink(t.Addr)
	case OpSource:
		return newSource(ctx, t.Addr, t.Bytes)
	case OpSmall:
		return smallRunner{*t.Small}, nil
	}
	sec, err := t.security()
	if err != nil {
		return nil, err
	}
	switch t.Op {
	case OpWait:
		return &waitTask{sec: sec, master: t.Master, servers: t.Servers}, nil
	case OpLocate:
		return &locateTask{sec: sec, master: t.Master, files: t.Files, chunks: t.PerChunk}, nil
	case OpMeta:
		return setupMetaLoad(ctx, t.Master, *t.Meta)
	case OpWatch, OpReadLoad, OpWriteLoad:
		return setupRecoveryTask(ctx, sec, t)
	}
	var trace *traceRecorder
	if t.Op == OpRead || t.Op == OpWrite || t.Op == OpAppend || t.Op == OpProbe {
		trace = newTraceRecorder()
	}
	buffer := int(t.IOSize)
	if t.Op == OpProbe {
		buffer = 0 // write-through: each write is one mutation and its commit, timed whole
	}
	c, err := dialClient(ctx, sec, t.Master, buffer, trace)
	if err != nil {
		return nil, err
	}
	r, err := setupFSTask(ctx, c, t, trace)
	if err != nil {
		c.Close()
		return nil, err
	}
	return r, nil
}

func setupFSTask(ctx context.Context, c *client.Client, t Task, trace *traceRecorder) (runner, error) {
	if err := makeParents(ctx, c, t); err != nil {
		return nil, err
	}
	switch t.Op {
	case OpPrepare:
		return &prepareTask{c: c, files: t.Files, size: t.Bytes, io: t.IOSize}, nil
	case OpRead:
		return newReadTask(ctx, c, t, trace)
	case OpWrite:
		f, err := c.Create(ctx, t.Path)
		if err != nil {
			return nil, err
		}
		return &writeTask{c: c, f: f, bytes: t.Bytes, io: t.IOSize, trace: trace}, nil
	case OpAppend:
		f, err := c.OpenFile(ctx, t.Path, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		return &appendTask{c: c, f: f, bytes: t.Bytes, io: t.IOSize, trace: trace}, nil
	case OpProbe:
		return newProbeTask(ctx, c, trace, t.Path, t.IOSize, int(max(t.Bytes/t.IOSize, 1)))
	}
	return nil, fmt.Errorf("task %s is not a file system task", t.Op)
}

// makeParents makes the directories the task's files go in.
func makeParents(ctx context.Context, c *client.Client, t Task) error {
	dirs := map[string]bool{}
	switch t.Op {
	case OpWrite, OpAppend, OpProbe:
		dirs[path.Dir(t.Path)] = true
	case OpPrepare:
		for _, f := range t.Files {
			dirs[path.Dir(f)] = true
		}
	}
	for d := range dirs {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// dialClient connects to the master with a write buffer of one operation, so
// that each of the workload's writes is one mutation, as in the paper.
func dialClient(ctx context.Context, sec *client.Security, master string, writeBuffer int, trace *traceRecorder) (*client.Client, error) {
	cfg := client.DefaultConfig()
	cfg.Master, cfg.Security = master, sec
	cfg.WriteBuffer = writeBuffer
	if trace != nil {
		cfg.Trace = trace.trace()
	}
	return client.New(ctx, cfg)
}

// payload returns n bytes of incompressible data.
func payload(n int64, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	r.Read(b)
	return b
}

// waitTask polls the master until it reports enough live chunkservers.
type waitTask struct {
	sec     *client.Security
	master  string
	servers int
}

func (w *waitTask) run(ctx context.Context) (Result, error) {
	var c *client.Client // connected once the master answers
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	return timed(func() (int64, int64, error) {
		for polls := int64(1); ; polls++ {
			if c == nil {
				c, _ = dialClient(ctx, w.sec, w.master, 0, nil)
			}
			if n, err := liveServers(ctx, c); err == nil && n >= w.servers {
				return 0, polls, nil
			}
			select {
			case <-ctx.Done():
				return 0, polls, fmt.Errorf("waiting for %d live chunkservers at %s: %w", w.servers, w.master, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

func (w *waitTask) close() error { return nil }

// liveServers is how many chunkservers the master of c sees alive.
func liveServers(ctx context.Context, c *client.Client) (int, error) {
	if c == nil {
		return 0, errors.New("not connected to the master")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rep, err := c.ClusterReport(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range rep.Servers {
		if s.Alive {
			n++
		}
	}
	return n, nil
}

// prepareTask writes the read set: each of files, size bytes long.
type prepareTask struct {
	c     *client.Client
	files []string
	size  int64
	io    int64
}

func (p *prepareTask) run(ctx context.Context) (Result, error) {
	buf := payload(p.io, 1)
	return timed(func() (int64, int64, error) {
		var total, ops int64
		for _, name := range p.files {
			n, k, err := writeFile(ctx, p.c, name, buf, p.size)
			total, ops = total+n, ops+k
			if err != nil {
				return total, ops, err
			}
		}
		return total, ops, nil
	})
}

func (p *prepareTask) close() error { return p.c.Close() }

func writeFile(ctx context.Context, c *client.Client, name string, buf []byte, size int64) (int64, int64, error) {
	f, err := c.Create(ctx, name)
	if err != nil {
		return 0, 0, err
	}
	n, ops, err := writeAll(f, buf, size, nil)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, ops, err
}

// writeAll writes size bytes to f in len(buf) writes, timing each in ot
// unless it is nil.
func writeAll(f *client.File, buf []byte, size int64, ot *opTimer) (int64, int64, error) {
	var n, ops int64
	for n < size {
		t := time.Now()
		k, err := f.Write(buf[:min(int64(len(buf)), size-n)])
		if ot != nil {
			ot.since(t)
		}
		n, ops = n+int64(k), ops+1
		if err != nil {
			return n, ops, err
		}
	}
	return n, ops, nil
}

// writeTask writes one new file; its clock stops when Close has made the
// data durable on every replica.
type writeTask struct {
	c     *client.Client
	f     *client.File
	bytes int64
	io    int64
	trace *traceRecorder // the client's write attempts; may be nil
}

func (w *writeTask) run(ctx context.Context) (Result, error) {
	buf := payload(w.io, 2)
	if w.trace != nil {
		w.trace.take() // the Create's
	}
	var ot opTimer
	res, err := timed(func() (int64, int64, error) {
		n, ops, err := writeAll(w.f, buf, w.bytes, &ot)
		f := w.f
		w.f = nil
		t := time.Now()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		ot.since(t)
		return n, ops, err
	})
	res.OpsMS = ot.ms
	if w.trace != nil {
		res.Events = w.trace.take()
	}
	return res, err
}

func (w *writeTask) close() error {
	var err error
	if w.f != nil {
		err = w.f.Close()
		w.f = nil
	}
	return errors.Join(err, w.c.Close())
}

// appendTask appends records of io bytes to a shared file.
type appendTask struct {
	c     *client.Client
	f     *client.File
	bytes int64
	io    int64
	trace *traceRecorder // the client's append attempts; may be nil
}

func (a *appendTask) run(ctx context.Context) (Result, error) {
	rec := payload(a.io, 3)
	var ot opTimer
	if a.trace != nil {
		a.trace.take()
	}
	landed := map[int64]int64{} // record bytes by the index of the chunk they landed in
	cs := a.c.ChunkSize()
	res, err := timed(func() (int64, int64, error) {
		var n, ops int64
		for n < a.bytes {
			t := time.Now()
			off, err := a.f.Append(rec)
			if err != nil {
				return n, ops, err
			}
			ot.since(t)
			landed[off/cs] += int64(len(rec))
			n, ops = n+int64(len(rec)), ops+1
		}
		return n, ops, nil
	})
	res.OpsMS, res.ChunkBytes = ot.ms, landed
	if a.trace != nil {
		res.Events = a.trace.take()
	}
	return res, err
}

func (a *appendTask) close() error {
	var err error
	if a.f != nil {
		err = a.f.Close()
		a.f = nil
	}
	return errors.Join(err, a.c.Close())
}

// readTask reads randomly chosen io-sized, io-aligned regions of the read set.
type readTask struct {
	c     *client.Client
	files []*client.File
	sizes []int64
	bytes int64
	io    int64
	rng   *rand.Rand
	trace *traceRecorder // the client's read events; may be nil
}

func newReadTask(ctx context.Context, c *client.Client, t Task, trace *traceRecorder) (*readTask, error) {
	r := &readTask{c: c, trace: trace, bytes: t.Bytes, io: t.IOSize, rng: rand.New(rand.NewPCG(uint64(t.Seed), 0x9e3779b97f4a7c15))}
	for _, name := range t.Files {
		if err := r.open(ctx, name); err != nil {
			r.closeFiles()
			return nil, err
		}
	}
	if len(r.files) == 0 {
		return nil, fmt.Errorf("read set has no file of at least %d bytes", t.IOSize)
	}
	return r, nil
}

// open adds name to the read set if it holds at least one region.
func (r *readTask) open(ctx context.Context, name string) error {
	f, err := r.c.Open(ctx, name)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil || fi.Length < r.io {
		f.Close()
		return err
	}
	r.files, r.sizes = append(r.files, f), append(r.sizes, fi.Length)
	return nil
}

func (r *readTask) run(ctx context.Context) (Result, error) {
	buf := make([]byte, r.io)
	var ot opTimer
	if r.trace != nil {
		r.trace.take() // setup's reads are not part of the run
	}
	res, err := timed(func() (int64, int64, error) {
		var n, ops int64
		for n < r.bytes {
			i := r.rng.IntN(len(r.files))
			off := r.rng.Int64N(r.sizes[i]/r.io) * r.io
			t := time.Now()
			k, err := r.files[i].ReadAt(buf, off)
			ot.since(t)
			n, ops = n+int64(k), ops+1
			if err != nil {
				return n, ops, err
			}
		}
		return n, ops, nil
	})
	res.OpsMS = ot.ms
	if r.trace != nil {
		res.Events = r.trace.take()
	}
	return res, err
}

func (r *readTask) close() error {
	return errors.Join(r.closeFiles(), r.c.Close())
}

func (r *readTask) closeFiles() error {
	var errs []error
	for _, f := range r.files {
		errs = append(errs, f.Close())
	}
	r.files = nil
	return errors.Join(errs...)
}
