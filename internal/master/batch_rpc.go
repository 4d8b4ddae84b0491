package master

import (
	"context"
	"fmt"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Batch runs independent metadata operations in one call (batch.go). A
// call over rpc.MaxBatchOps or rpc.MaxBatchBytes fails whole
// (KindTooLarge, an InvalidArgument status) and nothing is done. The byte
// bound keeps the batch's log commands well inside one log entry.
func (m service) Batch(ctx context.Context, req *pb.BatchRequest) (*pb.BatchResponse, error) {
	if n := len(req.Ops); n > rpc.MaxBatchOps {
		return nil, chunkfs.E("batch", "", chunkfs.KindTooLarge, fmt.Sprintf("%d operations; at most %d in one batch", n, rpc.MaxBatchOps))
	}
	if n := batchBytes(req.Ops); n > rpc.MaxBatchBytes {
		return nil, chunkfs.E("batch", "", chunkfs.KindTooLarge, fmt.Sprintf("%d bytes of operations; at most %d in one batch", n, rpc.MaxBatchBytes))
	}
	ops := make([]batchOp, len(req.Ops))
	for i, op := range req.Ops {
		m.batchOpFrom(ctx, i, op, &ops[i])
	}
	results, err := m.runBatch(ctx, ops)
	if err != nil {
		return nil, err
	}
	return batchTo(results), nil
}

// batchBytes is ops' size by rpc.BatchOpSize.
func batchBytes(ops []*pb.MetaOp) int {
	n := 0
	for _, op := range ops {
		n += rpc.BatchOpSize(op)
	}
	return n
}

// batchOpFrom reads op, the batch's op i, into o, checking its arguments
// and caller exactly as its unary form does.
func (m *Master) batchOpFrom(ctx context.Context, i int, op *pb.MetaOp, o *batchOp) {
	o.name, o.reqID = "none", op.ReqId
	ctx = opContext(ctx, op.ReqId)
	switch x := op.GetOp().(type) {
	case *pb.MetaOp_Stat:
		o.name = "stat"
		if x.Stat != nil {
			o.stat, o.path, o.minState = true, x.Stat.Path, x.Stat.MinStateId
			o.caller, o.err = m.pathArg(ctx, "Batch", "stat", x.Stat.Path, x.Stat.Caller)
			return
		}
	case *pb.MetaOp_Create:
		o.name = "create"
		if x.Create != nil {
			o.cmd, o.err = m.createCommand(ctx, x.Create)
		}
	case *pb.MetaOp_Mkdir:
		o.name = "mkdir"
		if x.Mkdir != nil {
			o.cmd, o.err = m.mkdirCommand(ctx, x.Mkdir)
		}
	case *pb.MetaOp_Delete:
		o.name = "delete"
		if x.Delete != nil {
			o.cmd, o.err = m.deleteCommand(ctx, x.Delete)
		}
	case *pb.MetaOp_Rename:
		o.name = "rename"
		if x.Rename != nil {
			o.cmd, o.err = m.renameCommand(ctx, x.Rename)
		}
	case *pb.MetaOp_SetAttr:
		o.name = "setattr"
		if x.SetAttr != nil {
			o.cmd, o.err = m.setAttrCommand(ctx, x.SetAttr)
		}
	case *pb.MetaOp_CommitLength:
		o.name = "commit_length"
		if x.CommitLength != nil {
			o.cmd, o.err = m.commitLengthCommand(ctx, x.CommitLength)
		}
	}
	if o.cmd == nil && o.err == nil {
		o.err = chunkfs.E("batch", "", chunkfs.KindInvalid, fmt.Sprintf("operation %d names no request", i))
	}
}

// batchTo is the answer to a Batch call. The stats' messages take four
// allocations in all, not four each.
func batchTo(rs []batchResult) *pb.BatchResponse {
	n := 0
	for i := range rs {
		if rs[i].stat && rs[i].err == nil {
			n++
		}
	}
	res, wraps, resps, infos := make([]pb.MetaResult, n), make([]pb.MetaResult_Stat, n), make([]pb.StatResponse, n), make([]pb.FileInfo, n)
	resp := &pb.BatchResponse{Results: make([]*pb.MetaResult, len(rs))}
	j := 0
	for i := range rs {
		r := &rs[i]
		switch {
		case r.err != nil:
			resp.Results[i] = errorResult(r.err)
			continue
		case r.stat:
			rpc.SetFileInfo(&infos[j], r.info)
			resps[j].StateId, resps[j].Info = r.stateID, &infos[j]
			wraps[j].Stat = &resps[j]
			res[j].Result = &wraps[j]
			resp.Results[i] = &res[j]
			j++
		default:
			resp.Results[i] = mutationTo(r)
		}
		resp.StateId = max(resp.StateId, r.stateID)
	}
	return resp
}

// mutationTo is the answer to a mutation that succeeded, as its unary form
// gives it.
func mutationTo(r *batchResult) *pb.MetaResult {
	id := r.stateID
	switch r.op {
	case namespace.OpCreate:
		return &pb.MetaResult{Result: &pb.MetaResult_Create{Create: createResponse(id, r.info, r.created, r.parent)}}
	case namespace.OpMkdir:
		return &pb.MetaResult{Result: &pb.MetaResult_Mkdir{Mkdir: mkdirResponse(id, r.info, r.parent)}}
	case namespace.OpDelete, namespace.OpTrash:
		return &pb.MetaResult{Result: &pb.MetaResult_Delete{Delete: &pb.DeleteResponse{StateId: id, Parent: parentTo(r.parent)}}}
	case namespace.OpRename:
		return &pb.MetaResult{Result: &pb.MetaResult_Rename{Rename: &pb.RenameResponse{StateId: id}}}
	case namespace.OpSetAttr:
		return &pb.MetaResult{Result: &pb.MetaResult_SetAttr{SetAttr: &pb.SetAttrResponse{StateId: id, Info: rpc.FileInfoTo(r.info)}}}
	case namespace.OpCommitLength:
		return &pb.MetaResult{Result: &pb.MetaResult_CommitLength{CommitLength: &pb.CommitLengthResponse{StateId: id, Length: r.info.Length}}}
	}
	return errorResult(chunkfs.E(r.op.String(), "", chunkfs.KindOther, "no answer for this operation"))
}

// errorResult carries err, as a chunkfs error, in a batch result.
func errorResult(err error) *pb.MetaResult {
	return &pb.MetaResult{Result: &pb.MetaResult_Error{Error: rpc.DetailOf(err)}}
}
