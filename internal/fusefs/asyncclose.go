package fusefs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
)

// closer is what close(2) of a file waits for, chosen at mount time:
// the push of its writes to every replica (syncClose, the default), or
// only a slot among Config.AsyncClose pushes in flight (asyncClose), as an
// NFSv4 client holding a write delegation answers close before it writes
// back. Flush, Fsync, Release, Open, Lookup, Getattr and Setattr call it
// and never test the Config.
type closer interface {
	// close runs at close(2) of h: it pushes h's writes (and records
	// the version of the file the kernel caches), or starts to.
	close(ctx context.Context, h *handle) error
	// wait waits until no push of n is in flight, so that what the
	// cluster says of n is what this mount wrote; only ctx ends it early.
	wait(ctx context.Context, n *node) error
	// failed returns, once, the error of a push of n that failed after
	// its close(2) returned.
	failed(n *node) error
	// drain waits for every push in flight (unmount).
	drain()
}

// newCloser chooses the closer of cfg.
func newCloser(cfg Config, kernel kernelCache, log *slog.Logger) closer {
	if cfg.AsyncClose == 0 {
		return syncClose{kernel: kernel}
	}
	return &asyncClose{kernel: kernel, log: log, timeout: cfg.OpTimeout,
		slots: make(chan struct{}, cfg.AsyncClose), files: map[uint64]*inFlight{}}
}

// syncClose pushes a file's writes before close(2) returns.
type syncClose struct{ kernel kernelCache }

func (s syncClose) close(ctx context.Context, h *handle) error {
	if err := s.kernel.push(ctx, h); err != nil {
		h.w.reported() // returned by this close, or by the closer once
		return err
	}
	return s.kernel.flushed(ctx, h)
}

func (syncClose) wait(context.Context, *node) error { return nil }
func (syncClose) failed(*node) error                { return nil }
func (syncClose) drain()                            {}

// asyncClose answers close(2) of a written file once its push has a slot,
// and pushes it in the background. Until the push is done, an open, a
// look-up, a stat or a setattr of the file waits for it (a reader never
// sees the size from before), and so do fsync and the release of the
// handle; unmount waits for every push. A push that fails is logged and
// returned by the file's next close or fsync.
type asyncClose struct {
	kernel  kernelCache
	log     *slog.Logger
	timeout time.Duration // Config.OpTimeout, of each push
	slots   chan struct{} // one token per push in flight

	mu    sync.Mutex           // guards files
	files map[uint64]*inFlight // by inode number: the files with a push in flight or a failure not yet returned
	all   sync.WaitGroup       // every push in flight
}

// inFlight is one file's pushes in flight and its unreported failure.
type inFlight struct {
	pushes int
	done   chan struct{} // closed when pushes drops to 0
	err    error         // the first failed push not yet returned
}

// close returns an earlier push's failure, if any, and starts h's push
// once fewer than Config.AsyncClose are in flight. A file opened only for
// reading is closed as syncClose does.
func (a *asyncClose) close(ctx context.Context, h *handle) error {
	if !h.write {
		return syncClose{a.kernel}.close(ctx, h)
	}
	err := a.failed(h.n)
	select {
	case a.slots <- struct{}{}:
	case <-ctx.Done():
		return &chunkfs.Error{Op: "close", Path: h.n.path(), Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
	}
	ino := h.n.StableAttr().Ino
	a.begin(ino)
	go a.push(ino, h)
	return err
}

// push pushes h's writes and records the file's version, then frees its
// slot.
func (a *asyncClose) push(ino uint64, h *handle) {
	defer func() { <-a.slots }()
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	err := syncClose{a.kernel}.close(ctx, h)
	if err != nil {
		a.log.Warn("push after close failed; the file's next close or fsync returns it", "path", h.n.path(), "err", err)
	}
	a.end(ino, err)
}

func (a *asyncClose) begin(ino uint64) {
	a.all.Add(1)
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.files[ino]
	if f == nil {
		f = &inFlight{}
		a.files[ino] = f
	}
	if f.pushes == 0 {
		f.done = make(chan struct{})
	}
	f.pushes++
}

func (a *asyncClose) end(ino uint64, err error) {
	defer a.all.Done()
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.files[ino]
	if f.err == nil {
		f.err = err
	}
	if f.pushes--; f.pushes == 0 {
		close(f.done)
		if f.err == nil {
			delete(a.files, ino)
		}
	}
}

func (a *asyncClose) wait(ctx context.Context, n *node) error {
	a.mu.Lock()
	f := a.files[n.StableAttr().Ino]
	var done chan struct{}
	if f != nil && f.pushes > 0 {
		done = f.done
	}
	a.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return &chunkfs.Error{Op: "wait for push", Path: n.path(), Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
	}
}

func (a *asyncClose) failed(n *node) error {
	ino := n.StableAttr().Ino
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.files[ino]
	if f == nil || f.err == nil {
		return nil
	}
	err := f.err
	f.err = nil
	if f.pushes == 0 {
		delete(a.files, ino)
	}
	return err
}

func (a *asyncClose) drain() { a.all.Wait() }
