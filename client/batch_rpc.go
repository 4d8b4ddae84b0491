package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/reqid"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// Automatic batching of metadata calls. Each unary RPC costs the client and
// the master far more CPU in gRPC's HTTP/2 machinery than the master spends
// on a stat or a create, so concurrent metadata calls share RPCs: a call
// made while the lane's batch is in flight waits for the next batch, which
// carries every call queued meanwhile (Master.Batch). A lone caller sends at
// once, so batching adds no latency when there is nothing to amortise.
// Stats and mutations use separate lanes, so a stat never waits behind a
// log fsync.
//
// Limits: at most Config.MetaBatch calls and batchMaxBytes (by the master's
// own measure) per batch. One batch in flight per lane measured best (fewer,
// fuller batches: less CPU per call; docs/architecture.md §6); the lane
// allows more.

const (
	defaultMetaBatch = 256
	maxMetaBatch     = rpc.MaxBatchOps
	readsInFlight    = 1
	writesInFlight   = 1
	batchMaxBytes    = rpc.MaxBatchBytes / 2
)

// masterAPI is what the client calls on the master: the methods of
// pb.MasterClient it uses, without call options.
type masterAPI interface {
	ClusterInfo(context.Context, *pb.ClusterInfoRequest) (*pb.ClusterInfoResponse, error)
	ClusterReport(context.Context, *pb.ClusterReportRequest) (*pb.ClusterReportResponse, error)
	Stat(context.Context, *pb.StatRequest) (*pb.StatResponse, error)
	List(context.Context, *pb.ListRequest) (*pb.ListResponse, error)
	Create(context.Context, *pb.CreateRequest) (*pb.CreateResponse, error)
	Mkdir(context.Context, *pb.MkdirRequest) (*pb.MkdirResponse, error)
	Delete(context.Context, *pb.DeleteRequest) (*pb.DeleteResponse, error)
	Rename(context.Context, *pb.RenameRequest) (*pb.RenameResponse, error)
	SetAttr(context.Context, *pb.SetAttrRequest) (*pb.SetAttrResponse, error)
	CommitLength(context.Context, *pb.CommitLengthRequest) (*pb.CommitLengthResponse, error)
	GetChunks(context.Context, *pb.GetChunksRequest) (*pb.GetChunksResponse, error)
	PrepareWrite(context.Context, *pb.PrepareWriteRequest) (*pb.PrepareWriteResponse, error)
	ReportCorrupt(context.Context, *pb.ReportCorruptRequest) (*pb.ReportCorruptResponse, error)
	Fsck(context.Context, *pb.FsckRequest) (*pb.FsckResponse, error)
	GetXattr(context.Context, *pb.GetXattrRequest) (*pb.GetXattrResponse, error)
	ListXattr(context.Context, *pb.ListXattrRequest) (*pb.ListXattrResponse, error)
	SetXattr(context.Context, *pb.SetXattrRequest) (*pb.SetXattrResponse, error)
	RemoveXattr(context.Context, *pb.RemoveXattrRequest) (*pb.RemoveXattrResponse, error)
}

// batcher is the client's masterAPI: Stat, Create, Mkdir, Delete, Rename,
// SetAttr (other than truncation) and CommitLength are batched; every other
// call goes to the master as its own RPC.
type batcher struct {
	mc            pb.MasterClient
	reads, writes *lane
}

var _ masterAPI = (*batcher)(nil)

// newBatcher batches up to maxOps calls per RPC; maxOps 1 sends every call
// as its own RPC.
func newBatcher(mc pb.MasterClient, maxOps int) *batcher {
	b := &batcher{mc: mc, reads: newLane(mc, maxOps, readsInFlight), writes: newLane(mc, maxOps, writesInFlight)}
	if maxOps <= 1 {
		b.reads.direct, b.writes.direct = true, true
	}
	return b
}

// lane coalesces concurrent calls into Batch RPCs.
type lane struct {
	mc       pb.MasterClient
	maxOps   int
	inFlight int // most batches in flight at once

	direct bool // set at creation: every call is its own RPC, no queue

	mu      sync.Mutex // guards queue, sending and unary
	queue   []*call    // calls waiting for the next batch, oldest first
	sending int        // batches being sent
	unary   bool       // the master has no Batch RPC: send each call alone
}

func newLane(mc pb.MasterClient, maxOps, inFlight int) *lane {
	return &lane{mc: mc, maxOps: maxOps, inFlight: inFlight}
}

// call is one metadata call waiting for its result.
type call struct {
	ctx  context.Context
	op   *pb.MetaOp
	size int
	done chan struct{} // closed when res or err is set
	res  *pb.MetaResult
	err  error
}

// do runs op in a batch and returns its result (which may carry the op's
// own error) or the error that failed the whole batch.
func (l *lane) do(ctx context.Context, op *pb.MetaOp) (*pb.MetaResult, error) {
	op.ReqId = reqid.From(ctx) // a batch carries several operations' IDs
	if l.direct {
		return unaryCall(ctx, l.mc, op)
	}
	if err := ctx.Err(); err != nil {
		return nil, &chunkfs.Error{Kind: chunkfs.KindUnavailable, Err: err}
	}
	c := &call{ctx: ctx, op: op, size: rpc.BatchOpSize(op), done: make(chan struct{})}
	l.mu.Lock()
	if l.sending < l.inFlight {
		l.sending++
		l.mu.Unlock()
		l.send([]*call{c})
		return c.res, c.err
	}
	l.queue = append(l.queue, c)
	l.mu.Unlock()
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		if l.withdraw(c) {
			return nil, &chunkfs.Error{Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
		}
		// Already sent: the master may apply it whatever the client does.
		return nil, &chunkfs.Error{Kind: chunkfs.KindUnavailable, Err: fmt.Errorf("outcome unknown: %w", ctx.Err())}
	}
}

// exchange sends one batch and answers every call in it.
func (l *lane) exchange(calls []*call) {
	l.mu.Lock()
	unary := l.unary
	l.mu.Unlock()
	if unary {
		l.sendUnary(calls)
		return
	}
	calls = dropCanceled(calls)
	if len(calls) == 0 {
		return
	}
	req := &pb.BatchRequest{Ops: make([]*pb.MetaOp, len(calls))}
	for i, c := range calls {
		req.Ops[i] = c.op
	}
	ctx, cancel := batchContext(calls)
	resp, err := l.mc.Batch(ctx, req)
	cancel()
	if chunkfs.KindOf(err) == chunkfs.KindNotSupported {
		l.mu.Lock()
		l.unary = true
		l.mu.Unlock()
		l.sendUnary(calls)
		return
	}
	if err == nil && len(resp.Results) != len(calls) {
		err = chunkfs.E("batch", "", chunkfs.KindOther, fmt.Sprintf("master answered %d of %d operations", len(resp.Results), len(calls)))
	}
	for i, c := range calls {
		if err != nil {
			c.err = err
		} else {
			c.res = resp.Results[i]
		}
		close(c.done)
	}
}

// unaryCall sends op as its own RPC and wraps the answer as a batch result.
func unaryCall(ctx context.Context, mc pb.MasterClient, op *pb.MetaOp) (*pb.MetaResult, error) {
	var res pb.MetaResult
	var err error
	switch o := op.GetOp().(type) {
	case *pb.MetaOp_Stat:
		var r *pb.StatResponse
		r, err = mc.Stat(ctx, o.Stat)
		res.Result = &pb.MetaResult_Stat{Stat: r}
	case *pb.MetaOp_Create:
		var r *pb.CreateResponse
		r, err = mc.Create(ctx, o.Create)
		res.Result = &pb.MetaResult_Create{Create: r}
	case *pb.MetaOp_Mkdir:
		var r *pb.MkdirResponse
		r, err = mc.Mkdir(ctx, o.Mkdir)
		res.Result = &pb.MetaResult_Mkdir{Mkdir: r}
	case *pb.MetaOp_Delete:
		var r *pb.DeleteResponse
		r, err = mc.Delete(ctx, o.Delete)
		res.Result = &pb.MetaResult_Delete{Delete: r}
	case *pb.MetaOp_Rename:
		var r *pb.RenameResponse
		r, err = mc.Rename(ctx, o.Rename)
		res.Result = &pb.MetaResult_Rename{Rename: r}
	case *pb.MetaOp_SetAttr:
		var r *pb.SetAttrResponse
		r, err = mc.SetAttr(ctx, o.SetAttr)
		res.Result = &pb.MetaResult_SetAttr{SetAttr: r}
	case *pb.MetaOp_CommitLength:
		var r *pb.CommitLengthResponse
		r, err = mc.CommitLength(ctx, o.CommitLength)
		res.Result = &pb.MetaResult_CommitLength{CommitLength: r}
	default:
		return nil, chunkfs.E("batch", "", chunkfs.KindInvalid, "empty operation")
	}
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// resultErr returns the error a batch result carries, as a *chunkfs.Error.
func resultErr(r *pb.MetaResult) error {
	if e := rpc.ErrorOf(r.GetError()); e != nil {
		return e
	}
	return nil
}

// answer checks one result: the call's error, or the response field got
// picks out (nil when the master answered with something else).
func answer[T any](r *pb.MetaResult, err error, got func(*pb.MetaResult) *T) (*T, error) {
	if err != nil {
		return nil, err
	}
	if err := resultErr(r); err != nil {
		return nil, err
	}
	if v := got(r); v != nil {
		return v, nil
	}
	return nil, chunkfs.E("batch", "", chunkfs.KindOther, "master answered an operation with another kind of result")
}

// The calls that are not batched.

func (b *batcher) ClusterInfo(ctx context.Context, req *pb.ClusterInfoRequest) (*pb.ClusterInfoResponse, error) {
	return b.mc.ClusterInfo(ctx, req)
}

func (b *batcher) ClusterReport(ctx context.Context, req *pb.ClusterReportRequest) (*pb.ClusterReportResponse, error) {
	return b.mc.ClusterReport(ctx, req)
}

func (b *batcher) List(ctx context.Context, req *pb.ListRequest) (*pb.ListResponse, error) {
	return b.mc.List(ctx, req)
}

func (b *batcher) GetChunks(ctx context.Context, req *pb.GetChunksRequest) (*pb.GetChunksResponse, error) {
	return b.mc.GetChunks(ctx, req)
}

func (b *batcher) PrepareWrite(ctx context.Context, req *pb.PrepareWriteRequest) (*pb.PrepareWriteResponse, error) {
	return b.mc.PrepareWrite(ctx, req)
}

func (b *batcher) ReportCorrupt(ctx context.Context, req *pb.ReportCorruptRequest) (*pb.ReportCorruptResponse, error) {
	return b.mc.ReportCorrupt(ctx, req)
}

func (b *batcher) Fsck(ctx context.Context, req *pb.FsckRequest) (*pb.FsckResponse, error) {
	return b.mc.Fsck(ctx, req)
}

func (b *batcher) GetXattr(ctx context.Context, req *pb.GetXattrRequest) (*pb.GetXattrResponse, error) {
	return b.mc.GetXattr(ctx, req)
}

func (b *batcher) ListXattr(ctx context.Context, req *pb.ListXattrRequest) (*pb.ListXattrResponse, error) {
	return b.mc.ListXattr(ctx, req)
}

func (b *batcher) SetXattr(ctx context.Context, req *pb.SetXattrRequest) (*pb.SetXattrResponse, error) {
	return b.mc.SetXattr(ctx, req)
}

func (b *batcher) RemoveXattr(ctx context.Context, req *pb.RemoveXattrRequest) (*pb.RemoveXattrResponse, error) {
	return b.mc.RemoveXattr(ctx, req)
}

// The batched calls.

func (b *batcher) Stat(ctx context.Context, req *pb.StatRequest) (*pb.StatResponse, error) {
	r, err := b.reads.do(ctx, &pb.MetaOp{Op: &pb.MetaOp_Stat{Stat: req}})
	return answer(r, err, (*pb.MetaResult).GetStat)
}

func (b *batcher) Create(ctx context.Context, req *pb.CreateRequest) (*pb.CreateResponse, error) {
	r, err := b.writes.do(ctx, &pb.MetaOp{Op: &pb.MetaOp_Create{Create: req}})
	return answer(r, err, (*pb.MetaResult).GetCreate)
}

func (b *batcher) Mkdir(ctx context.Context, req *pb.MkdirRequest) (*pb.MkdirResponse, error) {
	r, err := b.writes.do(ctx, &pb.MetaOp{Op: &pb.MetaOp_Mkdir{Mkdir: req}})
	return answer(r, err, (*pb.MetaResult).GetMkdir)
}

func (b *batcher) Delete(ctx context.Context, req *pb.DeleteRequest) (*pb.DeleteResponse, error) {
	r, err := b.writes.do(ctx, &pb.MetaOp{Op: &pb.MetaOp_Delete{Delete: req}})
	return answer(r, err, (*pb.MetaResult).GetDelete)
}

func (b *batcher) Rename(ctx context.Context, req *pb.RenameRequest) (*pb.RenameResponse, error) {
	r, err := b.writes.do(ctx, &pb.MetaOp{Op: &pb.MetaOp_Rename{Rename: req}})
	return answer(r, err, (*pb.MetaResult).GetRename)
}

// SetAttr batches everything but a change of length: a truncation may
// have the master cut a chunk on its replicas, which would hold up the
// whole batch.
func (b *batcher) SetAttr(ctx context.Context, req *pb.SetAttrRequest) (*pb.SetAttrResponse, error) {
	if req.Length != nil {
		return b.mc.SetAttr(ctx, req)
	}
	r, err := b.writes.do(ctx, &pb.MetaOp{Op: &pb.MetaOp_SetAttr{SetAttr: req}})
	return answer(r, err, (*pb.MetaResult).GetSetAttr)
}

func (b *batcher) CommitLength(ctx context.Context, req *pb.CommitLengthRequest) (*pb.CommitLengthResponse, error) {
	r, err := b.writes.do(ctx, &pb.MetaOp{Op: &pb.MetaOp_CommitLength{CommitLength: req}})
	return answer(r, err, (*pb.MetaResult).GetCommitLength)
}
