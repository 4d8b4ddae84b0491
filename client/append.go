package client

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/reqid"
)

// Append appends record atomically at an offset the cluster chooses and
// returns that offset. The record is framed (length, CRC32C, unique ID) so
// that a RecordReader reads it back exactly once even though a retried
// append may store it more than once. A record is at most MaxRecord bytes.
// Append does not move the file offset.
func (f *File) Append(record []byte) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked("append", true); err != nil {
		return 0, err
	}
	if len(record) > f.c.MaxRecord() {
		return 0, chunkfs.E("append", f.path, chunkfs.KindTooLarge, "record larger than a quarter of a chunk")
	}
	if err := f.flushLocked(); err != nil {
		return 0, err
	}
	ctx := f.opCtx()
	if f.lastIdx < 0 {
		idx, err := f.c.lastChunk(ctx, f.path)
		if err != nil {
			return 0, err
		}
		f.lastIdx = idx
	}
	off, idx, err := f.c.appendRecord(ctx, f.path, frameRecord(f.c.nextRecordID(), record), f.lastIdx)
	f.lastIdx = idx
	f.rbuf = f.rbuf[:0]
	if err != nil {
		return 0, err
	}
	f.dirty[idx] = struct{}{}
	return off, nil
}

// appendRecord appends one framed record to path, starting at chunk idx (the
// caller's guess of the last chunk). It returns the frame's offset in the
// file and the chunk it landed in.
func (c *Client) appendRecord(ctx context.Context, path string, frame []byte, idx int64) (int64, int64, error) {
	if int64(len(frame)) > chunkfs.MaxRecordSize(c.chunkSize) {
		return 0, idx, chunkfs.E("append", path, chunkfs.KindTooLarge, "record larger than a quarter of a chunk")
	}
	r := c.newRetrier()
	for {
		off, err := c.appendOnce(ctx, path, frame, idx)
		switch {
		case err == nil:
			end := idx*c.chunkSize + off + int64(len(frame))
			if err := c.commitLength(ctx, path, end, 0); err != nil {
				return 0, idx, err
			}
			return idx*c.chunkSize + off, idx, nil
		case chunkfs.KindOf(err) == chunkfs.KindChunkFull:
			idx++ // the primary padded the chunk: go on to the next
			continue
		}
		c.log.DebugContext(ctx, "chunkfs append: attempt failed", "path", path, "chunk", idx, "err", err)
		if last, lerr := c.lastChunk(ctx, path); lerr == nil && last > idx {
			c.traceRetry("append", path, idx, err)
			idx = last // other appenders moved on: so do we
			continue
		}
		if !r.again(ctx, err) {
			return 0, idx, wrapOp("append", path, err)
		}
		c.traceRetry("append", path, idx, err)
	}
}

// A record of reserveMin bytes or more (framed) has room reserved for it at the
// primary before its data is pushed, so that one that will not fit in the
// chunk is refused before it crosses the network. Without it, with N
// appenders on a chunk, the up to N records in flight when it fills were
// all pushed to its replicas for nothing: on the GFS testbed (16 appenders,
// 1 MiB records) a chunk switch wasted 15 MiB, 12.6 s of the last chunk's
// servers' input. A small record is pushed at once: losing its push costs
// less than the round trip that reserving takes.
const reserveMin = 64 << 10

func (c *Client) appendOnce(ctx context.Context, path string, frame []byte, idx int64) (off int64, err error) {
	st := c.newStepTimer()
	ev := WriteAttempt{Path: path, Index: idx, Offset: -1, Length: len(frame), Append: true, Start: st.last, ReqID: reqid.From(ctx)}
	var used *chunkLoc // the lease the record went under, for the trace
	defer func() {
		if err == nil {
			ev.Offset = off
		}
		st.finish(&ev, used, err)
	}()
	loc, chunkSize, err := c.prepareCached(ctx, path, idx, true)
	st.step(&ev.Prepare)
	if err != nil {
		return 0, err
	}
	used = loc
	defer func() {
		if err != nil {
			c.leases.drop(path, idx)
			if suspectAfter(err) && loc != nil && loc.primary != "" {
				c.leases.suspect(path, idx, loc.primary)
			}
		}
	}()
	id := chunkfs.DataID(randomUint64())
	// loc.replicas is the master's chain (nearness.locate), the same for
	// every appender: the replicas forward in one direction only. With
	// orders that differ per client, two replicas forward to each other at
	// once and each one's ACKs queue behind the data going the same way.
	if len(frame) >= reserveMin {
		err := c.reserveCall(ctx, loc, id, len(frame), chunkSize)
		st.step(&ev.Reserve)
		if err != nil {
			return 0, err
		}
	}
	pushed := c.clock.Now()
	err = c.data.PushToken(ctx, loc.replicas, id, frame, loc.token)
	st.tracePush(loc, len(frame), st.step(&ev.Push), err)
	if err != nil {
		return 0, err
	}
	fresh, err := c.leaseAfterPush(ctx, path, idx, loc, pushed, true)
	st.step(&ev.Lease)
	if err != nil {
		return 0, err
	}
	// If the lease moved to another primary, the reservation stayed with
	// the old one, and the record is checked as an unreserved one.
	loc, used = fresh, fresh
	off, err = c.appendCall(ctx, loc, id, len(frame), chunkSize)
	st.step(&ev.Apply)
	if err != nil {
		return 0, err
	}
	return off, nil
}

// lastChunk returns the index of path's last chunk (0 for an empty file).
func (c *Client) lastChunk(ctx context.Context, path string) (int64, error) {
	fi, err := c.Stat(ctx, path)
	if err != nil {
		return 0, err
	}
	if fi.Chunks > 0 {
		return fi.Chunks - 1, nil
	}
	return fi.Length / c.chunkSize, nil
}
