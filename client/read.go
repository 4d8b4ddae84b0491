package client

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// readAt reads len(p) bytes of path at off, like io.ReaderAt: n < len(p)
// only with an error, io.EOF at the end of the file. Holes, and the region
// past a chunk's data but below the file's length, read as zeros.
func (c *Client) readAt(ctx context.Context, path string, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, chunkfs.E("read", path, chunkfs.KindInvalid, "negative offset")
	}
	if len(p) == 0 {
		return 0, nil
	}
	size, err := c.locs.length(ctx, path, off+int64(len(p)), off/c.chunkSize)
	if err != nil {
		return 0, err
	}
	if off >= size {
		return 0, io.EOF
	}
	want := p[:min(int64(len(p)), size-off)]
	n := 0
	for n < len(want) {
		pos := off + int64(n)
		idx, co := pos/c.chunkSize, pos%c.chunkSize
		m := int(min(int64(len(want)-n), c.chunkSize-co))
		if err := c.readChunk(ctx, path, idx, co, want[n:n+m]); err != nil {
			return n, err
		}
		n += m
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readChunk fills buf from chunk idx at offset co, trying every replica, then
// a fresh look-up, until RetryTimeout passes.
func (c *Client) readChunk(ctx context.Context, path string, idx, co int64, buf []byte) error {
	r := c.newRetrier()
	for fresh := false; ; fresh = true {
		loc, _, err := c.locs.lookup(ctx, path, idx, fresh)
		if err == nil {
			if loc == nil {
				clear(buf) // a hole
				return nil
			}
			if err = c.readReplicas(ctx, path, loc, co, buf); err == nil {
				return nil
			}
		}
		c.locs.drop(path)
		c.log.DebugContext(ctx, "chunkfs read: region failed, looking up again", "path", path, "chunk", idx, "err", err)
		if !r.again(ctx, err) {
			return err
		}
		c.traceRetry("read", path, idx, err)
	}
}

// chunkReader reads chunk data from one replica with the location's
// token, as rpc.DataClient.ReadToken.
type chunkReader interface {
	ReadToken(ctx context.Context, addr string, h chunkfs.Handle, v chunkfs.Version, off int64, p []byte, tok []byte) (int, error)
}

// Regions of at least parallelReadMin bytes are read in pieces from all
// replicas at once: each replica takes the next piece when it finishes one,
// so a replica that other readers keep busy serves less of the region and an
// idle one more. Smaller regions go to one replica, nearest first.
//
// A piece is at most readPieceSize. Towards the end of a region the pieces
// shrink (pieceSched): a replica's next piece is its share of what is left,
// by the rates the replicas achieved on their last pieces, and at least
// readPieceMin. With fixed pieces the last one often went to a replica that
// other readers kept slow, and the region waited a second or more for it
// while the other replicas idled (the GFS read benchmark, docs/architecture.md §6).
const (
	parallelReadMin = 1 << 20
	readPieceSize   = 512 << 10
	readPieceMin    = 128 << 10
	readPieceAlign  = 64 << 10 // piece sizes are multiples of this (a checksum block)
)

// readReplicas fills buf from chunk loc at offset co: a small region from
// the replicas in turn, a large one in pieces from all of them in parallel.
// Replicas that recently missed a deadline (suspects) are tried last and
// take no part in a parallel read.
func (c *Client) readReplicas(ctx context.Context, path string, loc *chunkLoc, co int64, buf []byte) error {
	replicas, good := c.suspects.order(loc.replicas, c.clock.Now())
	if len(buf) < parallelReadMin || good < 2 {
		_, err := c.readInTurn(ctx, path, loc, replicas, co, buf)
		return err
	}
	return c.readParallel(ctx, path, loc, replicas, good, co, buf)
}

// A piece still unread rescueAfter after it was asked for, and rescueMargin
// times as long as an idle replica would take for all of it at the rate
// that replica just achieved, is read again from the idle replica once the
// region has nothing else left (see pieceSched.idle). Seen on the GFS
// testbed: a 512 KiB piece taking 8.7 s on a replica whose flow had
// stalled, while the other two replicas had finished the rest of the
// region in 4.3 s; a hedge at once for every slow piece cost more than it
// saved (docs/architecture.md §6), so only a piece far behind is rescued, when the
// reader's NIC is otherwise idle.
const (
	rescueAfter  = time.Second
	rescueMargin = 4
)

// pieceSched hands out the pieces of a region to the workers of
// readParallel, one per replica, and tracks the pieces being read.
type pieceSched struct {
	mu      sync.Mutex
	next    int       // the first byte not handed out yet
	end     int       // the region's length
	rate    []float64 // bytes/s each worker achieved on its last piece; 0: none yet
	active  []bool    // workers still taking pieces
	flights map[int]*pieceFlight
	changed chan struct{} // closed and replaced when a flight ends
}

// pieceFlight is a piece being read by the worker it was handed to.
type pieceFlight struct {
	lo, hi  int
	worker  int
	start   time.Time
	cancel  context.CancelFunc // cancels the first request
	done    chan struct{}      // closed once the first request has returned
	rescued bool               // an idle worker took it to read again
	rescue  context.CancelFunc // cancels that rescue, once it has begun
	claimed bool               // an answer is in buf, or about to be
}

func newPieceSched(size, workers int) *pieceSched {
	s := &pieceSched{end: size, rate: make([]float64, workers), active: make([]bool, workers),
		flights: make(map[int]*pieceFlight), changed: make(chan struct{})}
	for i := range s.active {
		s.active[i] = true
	}
	return s
}

// take returns worker w's next piece [lo, hi), or lo == hi when none is
// left.
func (s *pieceSched) take(w int) (lo, hi int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lo = s.next
	if rem := s.end - s.next; rem > 0 {
		s.next += s.sizeLocked(w, rem)
	}
	return lo, s.next
}

// fly records that worker w reads [lo, hi) now, cancelled by cancel.
func (s *pieceSched) fly(w, lo, hi int, now time.Time, cancel context.CancelFunc) *pieceFlight {
	f := &pieceFlight{lo: lo, hi: hi, worker: w, start: now, cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	s.flights[lo] = f
	s.mu.Unlock()
	return f
}

// claim reports whether the caller's answer to f is the one kept: the
// first to claim it wins. A piece claimed is no longer in flight.
func (s *pieceSched) claim(f *pieceFlight) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.claimed {
		return false
	}
	f.claimed = true
	delete(s.flights, f.lo)
	close(s.changed)
	s.changed = make(chan struct{})
	return true
}

// idle is what worker w does when no piece is left to take: rescue a
// piece far behind (f), or wait until one ends or a moment passes (wait),
// or stop, when nothing is in flight (both nil).
func (s *pieceSched) idle(w int, now time.Time) (f *pieceFlight, wait <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.flights) == 0 {
		return nil, nil
	}
	if r := s.rate[w]; r > 0 {
		for _, g := range s.flights {
			if g.worker == w || g.rescued {
				continue
			}
			age := now.Sub(g.start)
			if age >= rescueAfter && age.Seconds() >= rescueMargin*float64(g.hi-g.lo)/r {
				g.rescued = true
				return g, nil
			}
		}
	}
	return nil, s.changed
}

// rescuing records the cancel function of f's rescue.
func (s *pieceSched) rescuing(f *pieceFlight, cancel context.CancelFunc) {
	s.mu.Lock()
	f.rescue = cancel
	s.mu.Unlock()
}

// rescueCancel returns f's rescue's cancel function, nil when there is
// none (yet).
func (s *pieceSched) rescueCancel(f *pieceFlight) context.CancelFunc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f.rescue
}

// sizeLocked is worker w's next piece when rem bytes are left: half its
// share of rem by the workers' rates (a worker that has not finished a
// piece yet counts as the average of those that have, or all as equals),
// rounded up to readPieceAlign, within [readPieceMin, readPieceSize]; a
// remainder under readPieceMin goes with it rather than alone. Half, so
// that each worker comes back once more before the end with a rate
// measured meanwhile: a whole share sized by a rate that then changed
// (another reader arriving at that replica) decides the region's end
// alone. (A whole share: reads N = 8 87.4/86.1/90.3 %; half: 90.6/88.0/89.1
// %, the idle tail's p90 0.34 s against 0.28 s.)
func (s *pieceSched) sizeLocked(w, rem int) int {
	var known float64
	n, workers := 0, 0
	for i, a := range s.active {
		if a || i == w {
			workers++
			if s.rate[i] > 0 {
				known += s.rate[i]
				n++
			}
		}
	}
	avg := 1.0
	if n > 0 {
		avg = known / float64(n)
	}
	mine := s.rate[w]
	if mine <= 0 {
		mine = avg
	}
	sum := known + avg*float64(workers-n)
	size := int(float64(rem) * mine / sum / 2)
	size = (size + readPieceAlign - 1) / readPieceAlign * readPieceAlign
	size = min(max(size, readPieceMin), readPieceSize)
	if rem-size < readPieceMin {
		size = rem
	}
	return size
}

// done records that worker w read n bytes in d.
func (s *pieceSched) done(w, n int, d time.Duration) {
	if n <= 0 || d <= 0 {
		return
	}
	s.mu.Lock()
	s.rate[w] = float64(n) / d.Seconds()
	s.mu.Unlock()
}

// stop records that worker w takes no more pieces.
func (s *pieceSched) stop(w int) {
	s.mu.Lock()
	s.active[w] = false
	s.mu.Unlock()
}

// readParallel reads buf in pieces, one worker for each of the first
// workers replicas taking pieces in order until none is left, then
// waiting for the pieces still being read and rescuing one far behind
// (rescueAfter). A piece whose replica fails is
// read from the others in turn, and that worker stops taking pieces unless
// it is the last one still working; the first piece that no replica can
// serve fails the whole region (the caller looks the chunk up again and
// retries).
func (c *Client) readParallel(ctx context.Context, path string, loc *chunkLoc, replicas []string, workers int, co int64, buf []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sched := newPieceSched(len(buf), workers)
	var working atomic.Int32
	working.Store(int32(workers))
	var errOnce sync.Once
	var first error // the first failure; written once, read after Wait
	fail := func(err error) { errOnce.Do(func() { first = err; cancel() }) }
	var wg sync.WaitGroup
	good, rest := replicas[:workers], replicas[workers:]
	for i := range workers {
		// Its own replica first, then the other workers', then the rest.
		order := slices.Concat(good[i:], good[:i], rest)
		wg.Go(func() {
			defer sched.stop(i)
			for {
				if err := ctx.Err(); err != nil { // ours after a failure, or the caller's
					fail(&chunkfs.Error{Op: "read", Path: path, Kind: chunkfs.KindUnavailable, Err: err})
					return
				}
				lo, hi := sched.take(i)
				if lo == hi {
					f, wait := sched.idle(i, time.Now())
					switch {
					case f != nil:
						if !c.rescuePiece(ctx, path, loc, order, co, buf, sched, f) {
							return // its replica failed too: the first request goes on
						}
					case wait != nil:
						select {
						case <-wait:
						case <-time.After(rescueAfter / 10):
						case <-ctx.Done():
						}
					default:
						return
					}
					continue
				}
				// Real time, not c.clock: the rates are the network's.
				t0 := time.Now()
				pctx, pcancel := context.WithCancel(ctx)
				f := sched.fly(i, lo, hi, t0, pcancel)
				own, err := c.readInTurn(pctx, path, loc, order, co+int64(lo), buf[lo:hi])
				took := time.Since(t0)
				won := sched.claim(f)
				close(f.done)
				pcancel()
				if !won {
					// A rescue has the piece (and cancelled this request).
					c.tracePiece(ctx, loc, order[0], lo, hi-lo, t0, took, own, "rescued elsewhere", err)
					continue
				}
				if rc := sched.rescueCancel(f); rc != nil {
					rc()
				}
				c.tracePiece(ctx, loc, order[0], lo, hi-lo, t0, took, own, "", err)
				if err != nil {
					fail(err)
					return
				}
				if own {
					sched.done(i, hi-lo, took)
				}
				if !own && working.Add(-1) > 0 {
					return // its replica failed: leave the rest to the others
				} else if !own {
					working.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return first
}

// rescuePiece reads the piece of f again, from order (the idle worker's replica
// first), into a buffer of its own. If it answers before the first request,
// that request is cancelled and, once it has returned (so that it writes
// to buf no more), the answer is copied into buf. It reports whether the
// worker should go on: its replica served the rescue, or the first request
// answered first.
func (c *Client) rescuePiece(ctx context.Context, path string, loc *chunkLoc, order []string, co int64, buf []byte, sched *pieceSched, f *pieceFlight) bool {
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	sched.rescuing(f, rcancel)
	tmp := make([]byte, f.hi-f.lo)
	t0 := time.Now()
	own, err := c.readInTurn(rctx, path, loc, order, co+int64(f.lo), tmp)
	note := "rescue"
	if err == nil && sched.claim(f) {
		f.cancel()
		<-f.done
		copy(buf[f.lo:f.hi], tmp)
		note = "rescue, kept"
	}
	c.tracePiece(ctx, loc, order[0], f.lo, f.hi-f.lo, t0, time.Since(t0), own, note, err)
	if err != nil && rctx.Err() != nil && ctx.Err() == nil {
		return true // the first request answered first and cancelled this one
	}
	return err == nil && own
}

// tracePiece tells the trace (Config.Trace) how one piece of a parallel
// read went: the chunk, the replica first asked, the piece's offset and
// size, when it began and how long it took, and whether that replica
// served it.
func (c *Client) tracePiece(ctx context.Context, loc *chunkLoc, replica string, off, n int, t0 time.Time, took time.Duration, own bool, note string, err error) {
	if t := c.tracing(); t != nil && t.PieceRead != nil {
		t.PieceRead(PieceRead{Handle: loc.handle, Replica: replica, Offset: off, Bytes: n, Start: t0, Took: took, Other: !own, Note: note, Err: err})
	}
}

// readInTurn fills buf from the replicas in order until one answers in
// full; own reports whether the first replica answered without an error. A
// replica whose data ends before buf is full (a sparse chunk, or a replica
// that missed a write) is not trusted alone: the others are asked too and
// the longest answer wins, the rest reading as zeros.
func (c *Client) readInTurn(ctx context.Context, path string, loc *chunkLoc, replicas []string, co int64, buf []byte) (own bool, err error) {
	var last error
	best := -1 // bytes of buf filled by the longest short answer so far
	var tmp []byte
	for j, addr := range replicas {
		if err := ctx.Err(); err != nil && j > 0 {
			// Cancelled: a short answer so far must not read as zeros.
			return own, &chunkfs.Error{Op: "read", Path: path, Kind: chunkfs.KindUnavailable, Err: err}
		}
		dst := buf
		if best >= 0 {
			if tmp == nil {
				tmp = make([]byte, len(buf))
			}
			dst = tmp
		}
		n, err := c.readReplica(ctx, addr, j == len(replicas)-1, loc, co, dst)
		// A bare io.EOF is the end of the chunk's data; a broken connection
		// is a *chunkfs.Error that may wrap io.EOF and must not read as zeros.
		if err == nil || err == io.EOF {
			own = own || j == 0
			if best >= 0 && n > best {
				copy(buf, tmp[:n])
			}
			best = max(best, n)
			if best == len(buf) {
				return own, nil
			}
			continue
		}
		if chunkfs.KindOf(err) == chunkfs.KindChecksum && !rpc.InTransit(err) {
			c.reportCorrupt(loc.handle, addr) // the replica found its data corrupt
		}
		c.log.DebugContext(ctx, "chunkfs read: replica failed", "path", path, "handle", loc.handle, "replica", addr, "err", err)
		last = wrapOp("read", path, err)
	}
	if best >= 0 {
		clear(buf[best:]) // past the chunk's data but below the file's length
		return own, nil
	}
	if last == nil {
		last = chunkfs.E("read", path, chunkfs.KindUnavailable, "chunk has no live replica")
	}
	return own, last
}

// readReplica reads dst at co from one replica; unless it is the last
// one to try, within its deadline (readPace.timeout), a replica that
// misses it becoming a suspect (see suspects.go). A replica that no longer holds the chunk
// answers as stale, so that the read looks the chunk up again.
func (c *Client) readReplica(ctx context.Context, addr string, last bool, loc *chunkLoc, co int64, dst []byte) (int, error) {
	n, err := c.readReplicaOnce(ctx, addr, last, loc, co, dst)
	if chunkfs.KindOf(err) == chunkfs.KindNotExist {
		// The replica is gone (the balancer moved it, or it was trimmed
		// or collected) since the location was looked up: the location
		// is stale, and a fresh look-up finds where the chunk is now.
		err = &chunkfs.Error{Op: "read", Path: addr, Kind: chunkfs.KindStale, Err: err}
	}
	return n, err
}

func (c *Client) readReplicaOnce(ctx context.Context, addr string, last bool, loc *chunkLoc, co int64, dst []byte) (int, error) {
	if last {
		start := time.Now()
		n, err := c.reader.ReadToken(ctx, addr, loc.handle, loc.version, co, dst, loc.token)
		if err == nil || err == io.EOF {
			c.pace.observe(n, time.Since(start))
		}
		return n, err
	}
	d := c.pace.timeout(c.floor, len(dst))
	start := time.Now()
	deadline := start.Add(d) // real time, as the connection's deadline
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	n, err := c.reader.ReadToken(rctx, addr, loc.handle, loc.version, co, dst, loc.token)
	// The connection's deadline may fire just before the context's timer:
	// the clock decides, not which error came back.
	late := rctx.Err() != nil || !time.Now().Before(deadline)
	switch {
	case err != nil && err != io.EOF && ctx.Err() == nil && late:
		c.suspects.mark(addr, c.clock.Now())
		c.log.InfoContext(ctx, "chunkfs read: replica did not answer in time; trying another", "handle", loc.handle, "replica", addr, "deadline", d)
		return n, chunkfs.E("read", addr, chunkfs.KindUnavailable, "no answer within "+d.String())
	case err == nil || err == io.EOF:
		c.suspects.clear(addr)
		c.pace.observe(n, time.Since(start)) // real time: the rate is the network's
	}
	return n, err
}

// reportCorrupt tells the master, in the background, that a replica failed
// its checksum so that it re-replicates the chunk from a good one.
func (c *Client) reportCorrupt(h chunkfs.Handle, addr string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.reportCorruptCall(ctx, h, addr); err != nil {
			c.log.Warn("chunkfs: reporting a corrupt replica failed", "handle", h, "replica", addr, "err", err)
		}
	}()
}

// retrier paces retries with exponential back-off for RetryTimeout from
// the first failure: time an attempt spent moving data before it failed
// (a push queued behind many others on a slow network) is not retrying.
type retrier struct {
	c        *Client
	deadline time.Time // zero until the first failure
	wait     time.Duration
	noSpace  int // attempts that failed for want of space
}

// maxNoSpace bounds the retries of a mutation that failed for want of
// space: the writer names the primary in its next PrepareWrite
// (suspectAfter), the master's probe finds the replica that ran out of
// space (or that reported its copy corrupt) and moves the lease to the
// others at a new version, and the next attempt goes there; when it
// cannot (too few servers with room), the error stands.
const maxNoSpace = 2

// suspectAfter reports whether a mutation that failed with err names its
// primary in the next PrepareWrite, for the master to probe the chunk's
// replicas: one did not answer, or ran out of space.
func suspectAfter(err error) bool {
	k := chunkfs.KindOf(err)
	return k == chunkfs.KindUnavailable || k == chunkfs.KindNoSpace
}

func (c *Client) newRetrier() *retrier {
	return &retrier{c: c, wait: 20 * time.Millisecond}
}

// again reports whether to retry after err, sleeping first.
func (r *retrier) again(ctx context.Context, err error) bool {
	now := r.c.clock.Now()
	if r.deadline.IsZero() {
		r.deadline = now.Add(r.c.cfg.RetryTimeout)
	}
	if ctx.Err() != nil || !now.Before(r.deadline) {
		return false
	}
	if !retryable(err) {
		if chunkfs.KindOf(err) != chunkfs.KindNoSpace || r.noSpace >= maxNoSpace {
			return false
		}
		r.noSpace++
	}
	select {
	case <-ctx.Done():
		return false
	case <-r.c.clock.After(r.wait):
	}
	r.wait = min(2*r.wait, time.Second)
	return true
}

// retryable reports whether err may go away on another replica, after a
// fresh look-up or a new lease.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	switch chunkfs.KindOf(err) {
	case chunkfs.KindUnavailable, chunkfs.KindNotLeader, chunkfs.KindStale,
		chunkfs.KindNotPrimary, chunkfs.KindChecksum, chunkfs.KindOther:
		return true
	}
	return false
}
