package client

import (
	"context"
	"slices"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/reqid"
)

// maxMutation bounds the data of one push and write, so that a chunkserver's
// push buffer holds a bounded amount per client request.
const maxMutation = 8 << 20

// writeAt writes p at off of path, splitting at chunk boundaries, and then
// tells the master the file now reaches off+len(p). It returns once every
// replica of every chunk touched has applied the data. When after is not
// nil, the data is pushed at once but applied (Write RPC, CommitLength)
// only once after has finished, and not at all if after failed: so
// consecutive flushes overlap one's push with the other's apply and still
// apply in order.
//
// mtime, when not zero, is the file's mtime the commit sets (Unix ns)
// instead of now (File.ModTimeAtCommit).
func (c *Client) writeAt(ctx context.Context, path string, p []byte, off int64, after *flight, mtime int64) error {
	if off < 0 {
		return chunkfs.E("write", path, chunkfs.KindInvalid, "negative offset")
	}
	if len(p) == 0 {
		return after.wait(ctx)
	}
	for n := 0; n < len(p); {
		pos := off + int64(n)
		idx, co := pos/c.chunkSize, pos%c.chunkSize
		m := int(min(int64(len(p)-n), c.chunkSize-co, maxMutation))
		if err := c.writeChunk(ctx, path, idx, co, p[n:n+m], after); err != nil {
			return err
		}
		n += m
	}
	if err := after.wait(ctx); err != nil {
		return err
	}
	return c.commitLength(ctx, path, off+int64(len(p)), mtime)
}

// writeChunk writes data at offset co of chunk idx: it asks the master for
// the primary, pushes the data along the replicas nearest first, waits for
// after, then asks the primary to apply it on every replica. Failures are
// retried with a fresh lease until RetryTimeout passes; after's failure is
// returned as it is.
func (c *Client) writeChunk(ctx context.Context, path string, idx, co int64, data []byte, after *flight) error {
	c.locs.forget(path, idx)
	defer c.locs.forget(path, idx) // a reader may have cached it as a hole meanwhile
	r := c.newRetrier()
	for {
		earlier, err := c.writeOnce(ctx, path, idx, co, data, after)
		if err == nil || earlier {
			return err
		}
		c.log.DebugContext(ctx, "chunkfs write: attempt failed", "path", path, "chunk", idx, "err", err)
		if !r.again(ctx, err) {
			return wrapOp("write", path, err)
		}
		c.traceRetry("write", path, idx, err)
	}
}

// writeOnce makes one attempt of writeChunk; earlier reports that err is
// after's failure (or the context ending while waiting for it).
func (c *Client) writeOnce(ctx context.Context, path string, idx, co int64, data []byte, after *flight) (earlier bool, err error) {
	st := c.newStepTimer()
	ev := WriteAttempt{Path: path, Index: idx, Offset: co, Length: len(data), Start: st.last, ReqID: reqid.From(ctx)}
	var used *chunkLoc // the lease the data went under, for the trace
	defer func() { st.finish(&ev, used, err) }()
	loc, _, err := c.prepareCached(ctx, path, idx, false)
	st.step(&ev.Prepare)
	if err != nil {
		return false, err
	}
	used = loc
	defer func() {
		if err != nil && !earlier {
			c.leases.drop(path, idx)
			if suspectAfter(err) && loc != nil && loc.primary != "" {
				c.leases.suspect(path, idx, loc.primary) // loc: the lease last used (nil if renewing it failed)
			}
		}
	}()
	id := chunkfs.DataID(randomUint64())
	pushed := c.clock.Now()
	err = c.data.PushToken(ctx, loc.replicas, id, data, loc.token)
	st.tracePush(loc, len(data), st.step(&ev.Push), err)
	if err != nil {
		return false, err
	}
	if err := after.wait(ctx); err != nil {
		return true, err
	}
	st.step(&ev.Wait)
	fresh, err := c.leaseAfterPush(ctx, path, idx, loc, pushed, false)
	st.step(&ev.Lease)
	if err != nil {
		loc = nil // the master failed, not the primary: suspect no chunkserver
		return false, err
	}
	loc, used = fresh, fresh
	err = c.writeCall(ctx, loc, co, id, len(data))
	st.step(&ev.Apply)
	return false, err
}

// prepare asks the master for a primary of chunk idx, allocating the chunk
// if needed. It returns the location and the cluster's chunk size.
func (c *Client) prepare(ctx context.Context, path string, idx int64, appending bool) (*chunkLoc, int64, error) {
	loc, chunkSize, err := c.prepareCall(ctx, path, idx, appending, c.leases.takeSuspect(path, idx))
	if err != nil {
		return nil, 0, err
	}
	if loc == nil || loc.primary == "" || len(loc.replicas) == 0 {
		return nil, 0, chunkfs.E("write", path, chunkfs.KindUnavailable, "master granted no primary")
	}
	return c.near.locate(loc), chunkSize, nil
}

// prepareCached is prepare for writes, using a lease the client already
// knows of while it holds. A lease the master says ends within leaseEnding
// is waited out (and leaseMargin more, the master's own slack being less),
// so that the next answer is a new lease: the master counts a lease from
// after its grant and a little longer, the primary from when the grant
// reached it, so at its end the master may still name a primary whose
// lease is over, and a mutation sent under it fails and is pushed again.
// (Seen on the GFS testbed: a write whose push took 43 s and its wait for
// the previous flush 17 s renewed its lease 60 s after the grant, got the
// same one, and the primary refused it.)
func (c *Client) prepareCached(ctx context.Context, path string, idx int64, appending bool) (*chunkLoc, int64, error) {
	for waits := 0; ; waits++ {
		now := c.clock.Now()
		if loc, cs, ok := c.leases.get(path, idx, now); ok {
			return loc, cs, nil
		}
		loc, cs, err := c.prepare(ctx, path, idx, appending)
		if err != nil {
			return nil, 0, err
		}
		loc.trusted = now.Add(loc.leaseLeft - leaseMargin)
		if loc.trusted.After(now) {
			c.leases.put(path, idx, loc, cs, loc.trusted)
		}
		if loc.leaseLeft >= leaseEnding || waits == maxLeaseWaits {
			return loc, cs, nil
		}
		wait := loc.leaseLeft + leaseMargin
		if t := c.tracing(); t != nil && t.LeaseWait != nil {
			t.LeaseWait(LeaseWait{Path: path, Index: idx, Left: loc.leaseLeft, Wait: wait})
		}
		select {
		case <-c.clock.After(wait):
		case <-ctx.Done():
			return nil, 0, &chunkfs.Error{Op: "write", Path: path, Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
		}
	}
}

// leaseEnding is how little time left makes a lease not worth using, and
// maxLeaseWaits how many such leases prepareCached waits out before it
// uses one anyway (the write then fails and is retried as any other).
const (
	leaseEnding   = 500 * time.Millisecond
	maxLeaseWaits = 2
)

// leaseAfterPush returns the lease to apply data pushed under loc with,
// the push having begun at pushed: loc while the client still trusts it or
// the push took less than leaseMargin (the time a write is allowed), else a
// fresh one from the master. A push can outlast the lease it began under
// (many flushes in flight on a slow network: on the GFS testbed 16
// writers' 1 MiB flushes each took ~40 s, and one that passed the 60 s
// lease failed its write). The pushed data waits in the replicas' buffers
// whatever the lease, so a new lease on the same replicas (perhaps another
// primary, a newer version) applies it; if the replicas changed, the
// caller has to push again (KindStale).
func (c *Client) leaseAfterPush(ctx context.Context, path string, idx int64, loc *chunkLoc, pushed time.Time, appending bool) (*chunkLoc, error) {
	now := c.clock.Now()
	if now.Before(loc.trusted) || now.Sub(pushed) < leaseMargin {
		return loc, nil
	}
	fresh, _, err := c.prepareCached(ctx, path, idx, appending)
	if err != nil {
		return nil, err
	}
	if !sameReplicas(fresh.replicas, loc.replicas) {
		return nil, chunkfs.E("write", path, chunkfs.KindStale, "the chunk's replicas changed while its data was pushed")
	}
	return fresh, nil
}

// sameReplicas reports whether a and b name the same replicas, in any
// order.
func sameReplicas(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, r := range a {
		if !slices.Contains(b, r) {
			return false
		}
	}
	return true
}

// secondaries lists the replicas other than the primary.
func secondaries(loc *chunkLoc) []string {
	out := make([]string, 0, len(loc.replicas))
	for _, a := range loc.replicas {
		if a != loc.primary {
			out = append(out, a)
		}
	}
	return out
}

// commitLength tells the master the file has data up to length, setting
// its mtime to mtime (Unix ns), or to now when mtime is zero.
//
// A commit only ever raises the length, so one the master is unavailable
// for (restarting, say) is retried until RetryTimeout: the data is on
// every replica already.
func (c *Client) commitLength(ctx context.Context, path string, length, mtime int64) error {
	r := c.newRetrier()
	var committed int64
	var err error
	for {
		committed, err = c.commitLengthCall(ctx, path, length, mtime)
		if err == nil || chunkfs.KindOf(err) != chunkfs.KindUnavailable || !r.again(ctx, err) {
			break
		}
	}
	if err != nil {
		return wrapOp("write", path, err)
	}
	c.locs.setLength(path, committed)
	return nil
}

// syncChunk makes every replica of chunk idx fsync.
func (c *Client) syncChunk(ctx context.Context, path string, idx int64) error {
	r := c.newRetrier()
	for {
		err := c.syncOnce(ctx, path, idx)
		if err == nil || !r.again(ctx, err) {
			return err
		}
	}
}

func (c *Client) syncOnce(ctx context.Context, path string, idx int64) (err error) {
	loc, _, err := c.prepareCached(ctx, path, idx, false)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			c.leases.drop(path, idx)
		}
	}()
	return c.syncCall(ctx, loc)
}
