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
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
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
		if !r.again(ctx, err) {
			return err
		}
	}
}

// chunkReader reads chunk data from one replica, as rpc.DataClient.Read.
type chunkReader interface {
	Read(ctx context.Context, addr string, h chunkfs.Handle, v chunkfs.Version, off int64, p []byte) (int, error)
}

// Regions of at least parallelReadMin bytes are read in pieces of
// readPieceSize from all replicas at once: each replica takes the next piece
// when it finishes one, so a replica that other readers keep busy serves
// less of the region and an idle one more. Smaller regions go to one
// replica, nearest first.
const (
	parallelReadMin = 1 << 20
	readPieceSize   = 512 << 10
)

// readReplicas fills buf from chunk loc at offset co: a small region from
// the replicas in turn, a large one in pieces from all of them in parallel.
func (c *Client) readReplicas(ctx context.Context, path string, loc *chunkLoc, co int64, buf []byte) error {
	if len(buf) < parallelReadMin || len(loc.replicas) < 2 {
		_, err := c.readInTurn(ctx, path, loc, loc.replicas, co, buf)
		return err
	}
	return c.readParallel(ctx, path, loc, co, buf)
}

// readParallel reads buf in pieces, one worker per replica taking pieces in
// order until none is left. A piece whose replica fails is read from the
// others in turn, and that worker stops taking pieces unless it is the last
// one still working; the first piece that no replica can serve fails the
// whole region (the caller looks the chunk up again and retries).
func (c *Client) readParallel(ctx context.Context, path string, loc *chunkLoc, co int64, buf []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pieces := (len(buf) + readPieceSize - 1) / readPieceSize
	var next atomic.Int64 // the next piece to take
	var working atomic.Int32
	working.Store(int32(len(loc.replicas)))
	var errOnce sync.Once
	var first error // the first failure; written once, read after Wait
	var wg sync.WaitGroup
	for i := range loc.replicas {
		order := append(slices.Clone(loc.replicas[i:]), loc.replicas[:i]...)
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= pieces {
					return
				}
				if err := ctx.Err(); err != nil { // ours after a failure, or the caller's
					errOnce.Do(func() { first = &chunkfs.Error{Op: "read", Path: path, Kind: chunkfs.KindUnavailable, Err: err} })
					return
				}
				lo := k * readPieceSize
				hi := min(lo+readPieceSize, len(buf))
				own, err := c.readInTurn(ctx, path, loc, order, co+int64(lo), buf[lo:hi])
				if err != nil {
					errOnce.Do(func() { first = err; cancel() })
					return
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
		n, err := c.reader.Read(ctx, addr, loc.handle, loc.version, co, dst)
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
		c.log.Debug("chunkfs read: replica failed", "path", path, "handle", loc.handle, "replica", addr, "err", err)
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

// reportCorrupt tells the master, in the background, that a replica failed
// its checksum so that it re-replicates the chunk from a good one.
func (c *Client) reportCorrupt(h chunkfs.Handle, addr string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.master.ReportCorrupt(ctx, &pb.ReportCorruptRequest{Reporter: "client", Handle: uint64(h), Replica: addr})
		if err != nil {
			c.log.Warn("chunkfs: reporting a corrupt replica failed", "handle", h, "replica", addr, "err", err)
		}
	}()
}

// retrier paces retries with exponential back-off within RetryTimeout.
type retrier struct {
	c        *Client
	deadline time.Time
	wait     time.Duration
}

func (c *Client) newRetrier() *retrier {
	return &retrier{c: c, deadline: c.clock.Now().Add(c.cfg.RetryTimeout), wait: 20 * time.Millisecond}
}

// again reports whether to retry after err, sleeping first.
func (r *retrier) again(ctx context.Context, err error) bool {
	if !retryable(err) || ctx.Err() != nil || !r.c.clock.Now().Before(r.deadline) {
		return false
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
