package master

import (
	"context"
	"log/slog"

	"github.com/chunkfs/chunkfs/internal/reqid"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// A batch carries ops of several client operations, each with its own
// request ID (MetaOp.req_id): the call's context has none of them (the
// client sends a batch of several without an ID). opContext gives each op
// its own for its checks, and traceBatch logs each at debug level with it,
// as the RPC layer logs a unary call.

// opContext is ctx carrying op's request ID, when it has a well-formed
// one; else ctx (a malformed ID is ignored, as in gRPC metadata).
func opContext(ctx context.Context, op *pb.MetaOp) context.Context {
	if op.ReqId == "" {
		return ctx
	}
	return reqid.With(ctx, op.ReqId)
}

// traceBatch logs each op that carries a request ID with its result.
func (m *Master) traceBatch(ctx context.Context, ops []*pb.MetaOp, results []*pb.MetaResult) {
	if !m.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	for i, op := range ops {
		octx := opContext(ctx, op)
		if op.ReqId == "" || reqid.From(octx) != op.ReqId {
			continue
		}
		args := []any{"op", metaOpName(op), "ops", len(ops)}
		if e := rpc.ErrorOf(results[i].GetError()); e != nil {
			args = append(args, "err", e)
		}
		m.cfg.Logger.DebugContext(octx, "batch op", args...)
	}
}

// metaOpName names the request an op carries.
func metaOpName(op *pb.MetaOp) string {
	switch op.GetOp().(type) {
	case *pb.MetaOp_Stat:
		return "stat"
	case *pb.MetaOp_Create:
		return "create"
	case *pb.MetaOp_Mkdir:
		return "mkdir"
	case *pb.MetaOp_Delete:
		return "delete"
	case *pb.MetaOp_Rename:
		return "rename"
	case *pb.MetaOp_SetAttr:
		return "setattr"
	case *pb.MetaOp_CommitLength:
		return "commit_length"
	}
	return "none"
}
