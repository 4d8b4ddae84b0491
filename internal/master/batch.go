package master

// A Batch call runs independent metadata operations in one call, as if
// each had been its own unary call made concurrently: each is validated
// and permission-checked exactly as its unary form and fails alone with
// its own error, changing nothing. Stats are answered under the
// namespace's read lock; the mutations are logged together, in one log
// entry (one fsync). batch_rpc.go reads the call's operations into
// batchOps and writes its batchResults back.

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/reqid"
)

// A batchOp is one operation of a Batch call as the edge read it: a stat
// of path as caller once the state reaches minState, or a mutation's
// command; or the error that refused it before it ran.
type batchOp struct {
	name     string // the request it carried, for the trace
	reqID    string // its client operation's request ID, if any
	stat     bool
	caller   chunkfs.Caller // a stat's
	path     string         // a stat's
	minState uint64         // a stat's
	cmd      *namespace.Command
	err      error
}

// A batchResult is one operation's answer: its error, or the state ID
// it was answered at and what its unary form answers with.
type batchResult struct {
	stat    bool         // a stat's answer, else cmd's
	op      namespace.Op // the mutation's
	stateID uint64
	info    chunkfs.FileInfo
	created bool              // a create made the file
	parent  *chunkfs.FileInfo // a create's, mkdir's or delete's parent just after (parentAfter)
	err     error
}

// runBatch answers ops, one result each.
func (m *Master) runBatch(ctx context.Context, ops []batchOp) ([]batchResult, error) {
	if err := m.batchReadable(ctx, ops); err != nil {
		return nil, err
	}
	b := &batch{m: m, ops: ops, results: make([]batchResult, len(ops)), stats: make([]int, 0, len(ops))}
	for i := range ops {
		b.prepare(opContext(ctx, ops[i].reqID), i, &ops[i])
	}
	b.stat()
	b.mutate(ctx)
	m.traceBatch(ctx, ops, b.results)
	return b.results, nil
}

// batchReadable refuses, on a master that does not lead, a stat-only batch
// whose state it has not applied within ReadWait: as a whole call, so that
// the client sends it to another observer or the leader (an answer with
// each stat refused would be the batch's answer, taken as final).
func (m *Master) batchReadable(ctx context.Context, ops []batchOp) error {
	if m.leads() {
		return nil
	}
	var floor uint64
	for _, op := range ops {
		if !op.stat {
			return nil
		}
		floor = max(floor, op.minState)
	}
	return m.readable(ctx, "batch", floor)
}

// batch is one Batch call in progress.
type batch struct {
	m       *Master
	ops     []batchOp
	results []batchResult // one per op
	stats   []int         // the ops answered by stat, in order
	muts    []batchMutation
}

type batchMutation struct {
	i   int
	cmd *namespace.Command
	r   namespace.Result
	id  uint64
}

// prepare queues op i as a stat or a mutation, or answers it with its
// error.
func (b *batch) prepare(ctx context.Context, i int, op *batchOp) {
	err := op.err
	switch {
	case err != nil:
	case op.stat:
		if err = b.m.readable(ctx, "stat", op.minState); err == nil {
			b.stats = append(b.stats, i)
			return
		}
	case op.cmd.Op == namespace.OpSetAttr:
		if ch, shared := b.m.sharedCut(op.cmd); shared {
			// A truncation that cuts a chunk a snapshot shares cuts a copy
			// (a snapshot in between makes it fail KindUnavailable; retry).
			_, err = b.m.copyOnWrite(context.WithoutCancel(ctx), op.cmd.Caller, op.cmd.Path, ch)
		}
	}
	if err != nil {
		b.results[i] = batchResult{stat: op.stat, err: err}
		return
	}
	b.muts = append(b.muts, batchMutation{i: i, cmd: op.cmd})
}

// statsPerLock bounds how many stats run under one acquisition of the
// namespace's read lock, so a large batch does not hold off the log's
// applies for long.
const statsPerLock = 64

// stat answers the batch's stats.
func (b *batch) stat() {
	for start := 0; start < len(b.stats); start += statsPerLock {
		part := b.stats[start:min(start+statsPerLock, len(b.stats))]
		id := b.m.state.read(func(ns *namespace.Namespace) {
			for _, i := range part {
				r, op := &b.results[i], &b.ops[i]
				r.stat = true
				r.info, r.err = ns.Stat(op.caller, op.path)
			}
		})
		for _, i := range part {
			if b.results[i].err == nil {
				b.results[i].stateID = id
			}
		}
	}
}

// mutate logs the batch's mutations in one log entry and answers them.
func (b *batch) mutate(ctx context.Context) {
	if len(b.muts) == 0 {
		return
	}
	cmds := make([]*namespace.Command, len(b.muts))
	renames := false
	for j := range b.muts {
		cmds[j] = b.muts[j].cmd
		renames = renames || cmds[j].Op == namespace.OpRename
	}
	if renames {
		b.m.snapMu.RLock() // see Master.snapMu
	}
	rs, id, err := b.m.applyAll(ctx, cmds)
	if renames {
		b.m.snapMu.RUnlock()
	}
	if err != nil {
		for _, mu := range b.muts {
			b.results[mu.i] = batchResult{err: err}
		}
		return
	}
	var wg sync.WaitGroup
	for j := range b.muts {
		mu := &b.muts[j]
		mu.r, mu.id = rs[j], id
		if mu.r.Err != nil {
			b.results[mu.i] = batchResult{err: mu.r.Err}
			continue
		}
		if mu.r.Cut == nil && !mu.r.Allocated {
			b.m.settle(ctx, mu.cmd, mu.r) // only collects garbage: cannot fail
			b.results[mu.i] = b.answer(mu)
			continue
		}
		wg.Add(1)
		go func() { // cutting or placing a chunk calls its replicas: do those in parallel
			defer wg.Done()
			defer func() { // outside the RPC guard's goroutine: guard here
				if p := recover(); p != nil {
					b.m.cfg.Logger.Error("batch: panic cutting or placing a chunk", "path", mu.cmd.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
					b.results[mu.i] = batchResult{err: chunkfs.E(mu.cmd.Op.String(), mu.cmd.Path, chunkfs.KindOther, "internal error")}
				}
			}()
			if err := b.m.settle(ctx, mu.cmd, mu.r); err != nil {
				b.results[mu.i] = batchResult{err: err}
				return
			}
			b.results[mu.i] = b.answer(mu)
		}()
	}
	wg.Wait()
}

// answer is the answer to a mutation that succeeded, as its unary form
// gives it: a create's, a mkdir's or a delete's with its parent directory
// just after (Master.parentAfter).
func (b *batch) answer(mu *batchMutation) batchResult {
	r := batchResult{op: mu.cmd.Op, stateID: mu.id, info: mu.r.Info, created: mu.r.Created}
	switch mu.cmd.Op {
	case namespace.OpCreate, namespace.OpMkdir, namespace.OpDelete, namespace.OpTrash:
		r.parent = b.m.parentAfter(mu.cmd.Caller, mu.cmd.Path)
	}
	return r
}

// applyAll stamps cmds with the time and logs them in one log entry; it
// returns their results and the entry's index. A failure of the log fails
// them all.
func (m *Master) applyAll(ctx context.Context, cmds []*namespace.Command) ([]namespace.Result, uint64, error) {
	now := m.cfg.Clock.Now().UnixNano()
	enc := make([][]byte, len(cmds))
	for i, c := range cmds {
		c.Time = now
		enc[i] = c.Encode(nil)
	}
	res, index, err := m.log.ApplyAll(ctx, enc)
	if err != nil {
		return nil, 0, err
	}
	out := make([]namespace.Result, len(cmds))
	for i, r := range res {
		var ok bool
		if out[i], ok = r.(namespace.Result); !ok {
			out[i] = namespace.Result{Err: chunkfs.E(cmds[i].Op.String(), cmds[i].Path, chunkfs.KindOther, "log returned no result")}
		}
	}
	return out, index, nil
}

// A batch carries ops of several client operations, each with its own
// request ID: the call's context has none of them (the client sends a
// batch of several without an ID). opContext gives each op its own for
// its checks, and traceBatch logs each at debug level with it, as the RPC
// layer logs a unary call.

// opContext is ctx carrying the request ID id, when it is a well-formed
// one; else ctx (a malformed ID is ignored, as in gRPC metadata).
func opContext(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return reqid.With(ctx, id)
}

// traceBatch logs each op that carries a request ID with its result.
func (m *Master) traceBatch(ctx context.Context, ops []batchOp, results []batchResult) {
	if !m.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	for i, op := range ops {
		octx := opContext(ctx, op.reqID)
		if op.reqID == "" || reqid.From(octx) != op.reqID {
			continue
		}
		args := []any{"op", op.name, "ops", len(ops)}
		if err := results[i].err; err != nil {
			args = append(args, "err", err)
		}
		m.cfg.Logger.DebugContext(octx, "batch op", args...)
	}
}
