package rpc

import "github.com/chunkfs/chunkfs/internal/rpc/pb"

// Limits of one Master.Batch call. The master refuses a batch over either;
// the client library keeps its batches within them.
const (
	MaxBatchOps   = 1024
	MaxBatchBytes = 2 << 20 // BatchOpSize summed over the ops
	// BatchOpOverhead is the fixed charge per op in BatchOpSize.
	BatchOpOverhead = 64
)

// BatchOpSize is op's share of MaxBatchBytes: its variable-length fields
// (paths, link target, group list, request ID) plus BatchOpOverhead.
func BatchOpSize(op *pb.MetaOp) int {
	n := BatchOpOverhead + len(op.GetReqId())
	switch o := op.GetOp().(type) {
	case *pb.MetaOp_Stat:
		n += len(o.Stat.GetPath()) + 4*len(o.Stat.GetCaller().GetGids())
	case *pb.MetaOp_Create:
		n += len(o.Create.GetPath()) + len(o.Create.GetSymlinkTarget()) + 4*len(o.Create.GetCaller().GetGids())
	case *pb.MetaOp_Mkdir:
		n += len(o.Mkdir.GetPath()) + 4*len(o.Mkdir.GetCaller().GetGids())
	case *pb.MetaOp_Delete:
		n += len(o.Delete.GetPath()) + 4*len(o.Delete.GetCaller().GetGids())
	case *pb.MetaOp_Rename:
		n += len(o.Rename.GetSrc()) + len(o.Rename.GetDst()) + 4*len(o.Rename.GetCaller().GetGids())
	case *pb.MetaOp_SetAttr:
		n += len(o.SetAttr.GetPath()) + 4*len(o.SetAttr.GetCaller().GetGids())
	case *pb.MetaOp_CommitLength:
		n += len(o.CommitLength.GetPath()) + 4*len(o.CommitLength.GetCaller().GetGids())
	}
	return n
}
