package metadata

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/fleet"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// root is the caller of the benchmark's requests: the superuser.
var root = &pb.Caller{Uid: 0, Gids: []uint32{0}}

// buildWorkers is how many files are given chunks at once.
const buildWorkers = 64

// builder builds a shape on a master through its RPCs, with the fleet
// holding the replicas, as clients would: directories and files in
// batches, each chunk by PrepareWrite (the master places it and grants
// its lease, calling the simulated servers), its length on the replicas
// the answer names (Fleet.Wrote), and the files' lengths by CommitLength.
type builder struct {
	s     shape
	fleet *fleet.Fleet
	pools []*rpc.Pool
	mc    []pb.MasterClient // one connection each, used round robin
	next  atomic.Int64
}

// newBuilder connects to the master at addr over conns connections.
func newBuilder(s shape, fl *fleet.Fleet, addr string, conns int) (*builder, error) {
	b := &builder{s: s, fleet: fl}
	for range conns {
		p := rpc.NewPool() // a pool each: a connection each
		b.pools = append(b.pools, p)
		m, err := p.Master(addr)
		if err != nil {
			b.close()
			return nil, err
		}
		b.mc = append(b.mc, m)
	}
	return b, nil
}

func (b *builder) close() {
	for _, p := range b.pools {
		p.Close()
	}
}

func (b *builder) client() pb.MasterClient {
	return b.mc[int(b.next.Add(1))%len(b.mc)]
}

// build makes the directories, the files, their chunks and lengths.
func (b *builder) build(ctx context.Context) error {
	if _, err := b.client().Mkdir(ctx, &pb.MkdirRequest{Caller: root, Path: shapeRoot, Mode: 0o755, Parents: true}); err != nil {
		return fmt.Errorf("mkdir %s: %v", shapeRoot, err)
	}
	err := b.batches(ctx, b.s.dirs(), func(d int) *pb.MetaOp {
		return &pb.MetaOp{Op: &pb.MetaOp_Mkdir{Mkdir: &pb.MkdirRequest{Caller: root, Path: dirPath(d), Mode: 0o755}}}
	})
	if err != nil {
		return err
	}
	return b.files(ctx, b.s)
}

// files makes the files of s, their chunks and lengths.
func (b *builder) files(ctx context.Context, s shape) error {
	err := b.batches(ctx, s.files(), func(i int) *pb.MetaOp {
		return &pb.MetaOp{Op: &pb.MetaOp_Create{Create: &pb.CreateRequest{Caller: root, Path: s.filePath(i), Mode: 0o644, Exclusive: true}}}
	})
	if err != nil {
		return err
	}
	if err := b.allChunks(ctx, s); err != nil {
		return err
	}
	return b.batches(ctx, s.files(), func(i int) *pb.MetaOp {
		return &pb.MetaOp{Op: &pb.MetaOp_CommitLength{CommitLength: &pb.CommitLengthRequest{Caller: root, Path: s.filePath(i), Length: s.fileLength(i)}}}
	})
}

// trash builds the files of s and deletes them one by one into the
// trash, chunks and all: Table 2's dead files.
func (b *builder) trash(ctx context.Context, s shape) error {
	if err := b.files(ctx, s); err != nil {
		return err
	}
	return b.batches(ctx, s.files(), func(i int) *pb.MetaOp {
		return &pb.MetaOp{Op: &pb.MetaOp_Delete{Delete: &pb.DeleteRequest{Caller: root, Path: s.filePath(i), FileOnly: true}}}
	})
}

// batches sends op(0) … op(n-1) in batches of rpc.MaxBatchOps, a few at
// once; any operation's failure fails the build.
func (b *builder) batches(ctx context.Context, n int, op func(int) *pb.MetaOp) error {
	return parallel(ctx, len(b.mc), (n+rpc.MaxBatchOps-1)/rpc.MaxBatchOps, func(ctx context.Context, k int) error {
		req := &pb.BatchRequest{}
		for i := k * rpc.MaxBatchOps; i < min(n, (k+1)*rpc.MaxBatchOps); i++ {
			req.Ops = append(req.Ops, op(i))
		}
		resp, err := b.client().Batch(ctx, req)
		if err != nil {
			return err
		}
		for _, r := range resp.Results {
			if e := rpc.ErrorOf(r.GetError()); e != nil {
				return e
			}
		}
		return nil
	})
}

// allChunks gives every file of s its chunks.
func (b *builder) allChunks(ctx context.Context, s shape) error {
	return parallel(ctx, buildWorkers, s.files(), func(ctx context.Context, i int) error {
		for index := range s.chunks[i] {
			if err := b.chunk(ctx, s, i, index); err != nil {
				return err
			}
		}
		return nil
	})
}

// chunk allocates chunk index of file i of s and records its length on
// the replicas the master placed it on.
func (b *builder) chunk(ctx context.Context, s shape, i, index int) error {
	p := s.filePath(i)
	var resp *pb.PrepareWriteResponse
	err := retryUnavailable(ctx, prepareTries, 100*time.Millisecond, func() (err error) {
		resp, err = b.client().PrepareWrite(ctx, &pb.PrepareWriteRequest{Caller: root, Path: p, Index: int64(index)})
		return err
	})
	if err != nil {
		return fmt.Errorf("prepare write %s chunk %d: %v", p, index, err)
	}
	ch := resp.Chunk
	return b.fleet.Wrote(ch.Replicas, chunkfs.Handle(ch.Handle), s.chunkLength(i, index))
}

// prepareTries bounds the PrepareWrite calls a chunk gets: a master too
// loaded for a simulated server to take a lease in time answers
// unavailable, as it does to clients, which wait and ask again.
const prepareTries = 5

// retryUnavailable calls fn until it succeeds, fails otherwise than
// unavailable, or has been called tries times; it waits wait after the
// first failure, twice as long after each next one.
func retryUnavailable(ctx context.Context, tries int, wait time.Duration, fn func() error) error {
	for i := 1; ; i++ {
		err := fn()
		if err == nil || i >= tries || chunkfs.KindOf(rpc.Err(err)) != chunkfs.KindUnavailable {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait *= 2
	}
}

// parallel runs fn(0) … fn(n-1) on workers goroutines and returns the
// first error, after which no new call starts.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}
