package master

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// A Batch call over rpc.MaxBatchOps or rpc.MaxBatchBytes fails whole
// (KindTooLarge, an InvalidArgument status) and nothing is done. The byte
// bound keeps the batch's log commands well inside one log entry.

// Batch runs independent metadata operations in one call, as if each had
// been its own unary call made concurrently: each is validated and
// permission-checked exactly as its unary form and fails alone with its own
// error, changing nothing. Stats are answered under the namespace's read
// lock; the mutations are logged together, in one log entry (one fsync).
func (m service) Batch(ctx context.Context, req *pb.BatchRequest) (*pb.BatchResponse, error) {
	if n := len(req.Ops); n > rpc.MaxBatchOps {
		return nil, chunkfs.E("batch", "", chunkfs.KindTooLarge, fmt.Sprintf("%d operations; at most %d in one batch", n, rpc.MaxBatchOps))
	}
	if n := batchBytes(req.Ops); n > rpc.MaxBatchBytes {
		return nil, chunkfs.E("batch", "", chunkfs.KindTooLarge, fmt.Sprintf("%d bytes of operations; at most %d in one batch", n, rpc.MaxBatchBytes))
	}
	if err := m.batchReadable(ctx, req); err != nil {
		return nil, err
	}
	b := &batch{m: m.Master, results: make([]*pb.MetaResult, len(req.Ops)), stats: make([]batchStat, 0, len(req.Ops))}
	for i, op := range req.Ops {
		b.prepare(opContext(ctx, op), i, op)
	}
	b.stat()
	b.mutate(ctx)
	resp := &pb.BatchResponse{Results: b.results}
	for _, r := range b.results {
		resp.StateId = max(resp.StateId, resultStateID(r))
	}
	m.traceBatch(ctx, req.Ops, b.results)
	return resp, nil
}

// batchReadable refuses, on a master that does not lead, a stat-only batch
// whose state it has not applied within ReadWait: as a whole call, so that
// the client sends it to another observer or the leader (an answer with
// each stat refused would be the batch's answer, taken as final).
func (m *Master) batchReadable(ctx context.Context, req *pb.BatchRequest) error {
	if m.leads() || !readOnlyBatch(req) {
		return nil
	}
	var floor uint64
	for _, op := range req.Ops {
		floor = max(floor, op.GetStat().GetMinStateId())
	}
	return m.readable(ctx, "batch", floor)
}

// batchBytes is ops' size by rpc.BatchOpSize.
func batchBytes(ops []*pb.MetaOp) int {
	n := 0
	for _, op := range ops {
		n += rpc.BatchOpSize(op)
	}
	return n
}

// batch is one Batch call in progress.
type batch struct {
	m       *Master
	results []*pb.MetaResult // one per op; nil until answered
	stats   []batchStat
	muts    []batchMutation
}

type batchStat struct {
	i      int
	caller chunkfs.Caller
	path   string
}

type batchMutation struct {
	i   int
	cmd *namespace.Command
	r   namespace.Result
	id  uint64
}

// prepare validates op i and queues it as a stat or a mutation, or answers
// it with its error.
func (b *batch) prepare(ctx context.Context, i int, op *pb.MetaOp) {
	var cmd *namespace.Command
	var err error
	switch o := op.GetOp().(type) {
	case *pb.MetaOp_Stat:
		if o.Stat == nil {
			break
		}
		var c chunkfs.Caller
		if c, err = b.m.pathArg(ctx, "Batch", "stat", o.Stat.Path, o.Stat.Caller); err == nil {
			err = b.m.readable(ctx, "stat", o.Stat.MinStateId)
		}
		if err == nil {
			b.stats = append(b.stats, batchStat{i: i, caller: c, path: o.Stat.Path})
			return
		}
	case *pb.MetaOp_Create:
		if o.Create != nil {
			cmd, err = b.m.createCommand(ctx, o.Create)
		}
	case *pb.MetaOp_Mkdir:
		if o.Mkdir != nil {
			cmd, err = b.m.mkdirCommand(ctx, o.Mkdir)
		}
	case *pb.MetaOp_Delete:
		if o.Delete != nil {
			cmd, err = b.m.deleteCommand(ctx, o.Delete)
		}
	case *pb.MetaOp_Rename:
		if o.Rename != nil {
			cmd, err = b.m.renameCommand(ctx, o.Rename)
		}
	case *pb.MetaOp_SetAttr:
		if o.SetAttr != nil {
			cmd, err = b.m.setAttrCommand(ctx, o.SetAttr)
		}
		if ch, shared := b.m.sharedCut(cmd); err == nil && shared {
			// A truncation that cuts a chunk a snapshot shares cuts a copy
			// (a snapshot in between makes it fail KindUnavailable; retry).
			_, err = b.m.copyOnWrite(context.WithoutCancel(ctx), cmd.Caller, cmd.Path, ch)
		}
	case *pb.MetaOp_CommitLength:
		if o.CommitLength != nil {
			cmd, err = b.m.commitLengthCommand(ctx, o.CommitLength)
		}
	}
	switch {
	case err != nil:
		b.results[i] = errorResult(err)
	case cmd == nil:
		b.results[i] = errorResult(chunkfs.E("batch", "", chunkfs.KindInvalid, fmt.Sprintf("operation %d names no request", i)))
	default:
		b.muts = append(b.muts, batchMutation{i: i, cmd: cmd})
	}
}

// statsPerLock bounds how many stats run under one acquisition of the
// namespace's read lock, so a large batch does not hold off the log's
// applies for long.
const statsPerLock = 64

// stat answers the batch's stats.
func (b *batch) stat() {
	for start := 0; start < len(b.stats); start += statsPerLock {
		part := b.stats[start:min(start+statsPerLock, len(b.stats))]
		infos := make([]chunkfs.FileInfo, len(part))
		errs := make([]error, len(part))
		id := b.m.state.read(func(ns *namespace.Namespace) {
			for j, s := range part {
				infos[j], errs[j] = ns.Stat(s.caller, s.path)
			}
		})
		// The answers' messages in four allocations, not four per stat.
		res := make([]pb.MetaResult, len(part))
		wraps := make([]pb.MetaResult_Stat, len(part))
		resps := make([]pb.StatResponse, len(part))
		pbInfos := make([]pb.FileInfo, len(part))
		for j, s := range part {
			if errs[j] != nil {
				b.results[s.i] = errorResult(errs[j])
				continue
			}
			rpc.SetFileInfo(&pbInfos[j], infos[j])
			resps[j].StateId, resps[j].Info = id, &pbInfos[j]
			wraps[j].Stat = &resps[j]
			res[j].Result = &wraps[j]
			b.results[s.i] = &res[j]
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
			b.results[mu.i] = errorResult(err)
		}
		return
	}
	var wg sync.WaitGroup
	for j := range b.muts {
		mu := &b.muts[j]
		mu.r, mu.id = rs[j], id
		if mu.r.Err != nil {
			b.results[mu.i] = errorResult(mu.r.Err)
			continue
		}
		if mu.r.Cut == nil && !mu.r.Allocated {
			b.m.settle(ctx, mu.cmd, mu.r) // only collects garbage: cannot fail
			b.results[mu.i] = b.withParent(mu, mutationResult(mu))
			continue
		}
		wg.Add(1)
		go func() { // cutting or placing a chunk calls its replicas: do those in parallel
			defer wg.Done()
			defer func() { // outside the RPC guard's goroutine: guard here
				if p := recover(); p != nil {
					b.m.cfg.Logger.Error("batch: panic cutting or placing a chunk", "path", mu.cmd.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
					b.results[mu.i] = errorResult(chunkfs.E(mu.cmd.Op.String(), mu.cmd.Path, chunkfs.KindOther, "internal error"))
				}
			}()
			if err := b.m.settle(ctx, mu.cmd, mu.r); err != nil {
				b.results[mu.i] = errorResult(err)
				return
			}
			b.results[mu.i] = b.withParent(mu, mutationResult(mu))
		}()
	}
	wg.Wait()
}

// withParent adds to a create's, a mkdir's or a delete's answer its parent
// directory just after, as the unary calls give it (Master.parentAfter).
func (b *batch) withParent(mu *batchMutation, r *pb.MetaResult) *pb.MetaResult {
	switch {
	case r.GetCreate() != nil:
		r.GetCreate().Parent = b.m.parentAfter(mu.cmd.Caller, mu.cmd.Path)
	case r.GetMkdir() != nil:
		r.GetMkdir().Parent = b.m.parentAfter(mu.cmd.Caller, mu.cmd.Path)
	case r.GetDelete() != nil:
		r.GetDelete().Parent = b.m.parentAfter(mu.cmd.Caller, mu.cmd.Path)
	}
	return r
}

// mutationResult is the answer to a mutation that succeeded, as its unary
// form gives it.
func mutationResult(mu *batchMutation) *pb.MetaResult {
	r, id := mu.r, mu.id
	switch mu.cmd.Op {
	case namespace.OpCreate:
		return &pb.MetaResult{Result: &pb.MetaResult_Create{Create: createResponse(r, id)}}
	case namespace.OpMkdir:
		return &pb.MetaResult{Result: &pb.MetaResult_Mkdir{Mkdir: mkdirResponse(r, id)}}
	case namespace.OpDelete, namespace.OpTrash:
		return &pb.MetaResult{Result: &pb.MetaResult_Delete{Delete: &pb.DeleteResponse{StateId: id}}}
	case namespace.OpRename:
		return &pb.MetaResult{Result: &pb.MetaResult_Rename{Rename: &pb.RenameResponse{StateId: id}}}
	case namespace.OpSetAttr:
		return &pb.MetaResult{Result: &pb.MetaResult_SetAttr{SetAttr: &pb.SetAttrResponse{StateId: id, Info: rpc.FileInfoTo(r.Info)}}}
	case namespace.OpCommitLength:
		return &pb.MetaResult{Result: &pb.MetaResult_CommitLength{CommitLength: &pb.CommitLengthResponse{StateId: id, Length: r.Info.Length}}}
	}
	return errorResult(chunkfs.E(mu.cmd.Op.String(), mu.cmd.Path, chunkfs.KindOther, "no answer for this operation"))
}

// errorResult carries err, as a chunkfs error, in a batch result.
func errorResult(err error) *pb.MetaResult {
	return &pb.MetaResult{Result: &pb.MetaResult_Error{Error: rpc.DetailOf(err)}}
}

// resultStateID is the state ID a result carries (0 for an error).
func resultStateID(r *pb.MetaResult) uint64 {
	switch x := r.GetResult().(type) {
	case *pb.MetaResult_Stat:
		return x.Stat.GetStateId()
	case *pb.MetaResult_Create:
		return x.Create.GetStateId()
	case *pb.MetaResult_Mkdir:
		return x.Mkdir.GetStateId()
	case *pb.MetaResult_Delete:
		return x.Delete.GetStateId()
	case *pb.MetaResult_Rename:
		return x.Rename.GetStateId()
	case *pb.MetaResult_SetAttr:
		return x.SetAttr.GetStateId()
	case *pb.MetaResult_CommitLength:
		return x.CommitLength.GetStateId()
	}
	return 0
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
