package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"sync"
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeMaster answers Batch (and unary Stat and Create) from a set of
// existing paths, records the batches it gets, and can hold each Batch
// until released.
type fakeMaster struct {
	pb.MasterClient // nil: calls not overridden panic

	noBatch bool          // answer Batch with Unimplemented
	gate    chan struct{} // when set, each Batch waits for a value

	mu      sync.Mutex // guards the fields below
	exists  map[string]bool
	batches [][]*pb.MetaOp
	unary   int
	started chan struct{} // gets a value when a Batch starts
}

func newFakeMaster() *fakeMaster {
	return &fakeMaster{exists: map[string]bool{"/": true}, started: make(chan struct{}, 1024)}
}

func (f *fakeMaster) Batch(ctx context.Context, req *pb.BatchRequest, _ ...grpc.CallOption) (*pb.BatchResponse, error) {
	if f.noBatch {
		return nil, &chunkfs.Error{Kind: chunkfs.KindNotSupported, Err: errors.New("unknown method Batch")}
	}
	f.started <- struct{}{}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, &chunkfs.Error{Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, req.Ops)
	resp := &pb.BatchResponse{StateId: 7}
	for _, op := range req.Ops {
		resp.Results = append(resp.Results, f.applyLocked(op))
	}
	return resp, nil
}

func (f *fakeMaster) applyLocked(op *pb.MetaOp) *pb.MetaResult {
	notExist := func(o, p string) *pb.MetaResult {
		return &pb.MetaResult{Result: &pb.MetaResult_Error{Error: &pb.ErrorDetail{Kind: uint32(chunkfs.KindNotExist), Op: o, Path: p}}}
	}
	switch o := op.Op.(type) {
	case *pb.MetaOp_Stat:
		if !f.exists[o.Stat.Path] {
			return notExist("stat", o.Stat.Path)
		}
		return &pb.MetaResult{Result: &pb.MetaResult_Stat{Stat: &pb.StatResponse{StateId: 7, Info: &pb.FileInfo{Name: o.Stat.Path[1:], Mode: 0o644}}}}
	case *pb.MetaOp_Create:
		if o.Create.Exclusive && f.exists[o.Create.Path] {
			return &pb.MetaResult{Result: &pb.MetaResult_Error{Error: &pb.ErrorDetail{Kind: uint32(chunkfs.KindExist), Op: "create", Path: o.Create.Path}}}
		}
		f.exists[o.Create.Path] = true
		return &pb.MetaResult{Result: &pb.MetaResult_Create{Create: &pb.CreateResponse{StateId: 8, Info: &pb.FileInfo{Name: o.Create.Path[1:], Mode: 0o644}, Created: true}}}
	case *pb.MetaOp_Delete:
		if !f.exists[o.Delete.Path] {
			return notExist("delete", o.Delete.Path)
		}
		delete(f.exists, o.Delete.Path)
		return &pb.MetaResult{Result: &pb.MetaResult_Delete{Delete: &pb.DeleteResponse{StateId: 9}}}
	}
	// Anything else is answered with the wrong kind of result.
	return &pb.MetaResult{Result: &pb.MetaResult_Rename{Rename: &pb.RenameResponse{}}}
}

func (f *fakeMaster) Stat(ctx context.Context, req *pb.StatRequest, _ ...grpc.CallOption) (*pb.StatResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unary++
	if !f.exists[req.Path] {
		return nil, chunkfs.E("stat", req.Path, chunkfs.KindNotExist, "")
	}
	return &pb.StatResponse{StateId: 3, Info: &pb.FileInfo{Name: req.Path[1:]}}, nil
}

func (f *fakeMaster) Create(ctx context.Context, req *pb.CreateRequest, _ ...grpc.CallOption) (*pb.CreateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unary++
	f.exists[req.Path] = true
	return &pb.CreateResponse{StateId: 4, Info: &pb.FileInfo{Name: req.Path[1:]}, Created: true}, nil
}

func (f *fakeMaster) record() (batches [][]*pb.MetaOp, unary int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.batches, f.unary
}

// TestBatcherLoneCall: a call with nothing in flight is sent at once, alone.
func TestBatcherLoneCall(t *testing.T) {
	f := newFakeMaster()
	f.exists["/a"] = true
	b := newBatcher(f, 256)
	resp, err := b.Stat(context.Background(), &pb.StatRequest{Path: "/a"})
	if err != nil || resp.Info.Name != "a" || resp.StateId != 7 {
		t.Fatalf("Stat = %v, %v", resp, err)
	}
	if _, err := b.Stat(context.Background(), &pb.StatRequest{Path: "/b"}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat of a missing path: %v", err)
	}
	if batches, _ := f.record(); len(batches) != 2 || len(batches[0]) != 1 || len(batches[1]) != 1 {
		t.Errorf("batches: %v", batches)
	}
	// A call whose context has already ended is not sent.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Create(ctx, &pb.CreateRequest{Path: "/late"}); chunkfs.KindOf(err) != chunkfs.KindUnavailable || !errors.Is(err, context.Canceled) {
		t.Errorf("Create with a canceled context: %v", err)
	}
	if batches, _ := f.record(); len(batches) != 2 {
		t.Errorf("a canceled call was sent: %d batches", len(batches))
	}
}

// TestBatcherDropsCanceledBeforeSending: calls whose callers gave up
// between queueing and sending are answered without being sent.
func TestBatcherDropsCanceledBeforeSending(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	live := &call{ctx: context.Background(), done: make(chan struct{})}
	dead := &call{ctx: ctx, done: make(chan struct{})}
	dead2 := &call{ctx: ctx, done: make(chan struct{})}
	got := dropCanceled([]*call{dead, live, dead2})
	if len(got) != 1 || got[0] != live {
		t.Fatalf("kept %d calls", len(got))
	}
	select {
	case <-dead.done:
		if chunkfs.KindOf(dead.err) != chunkfs.KindUnavailable {
			t.Errorf("dropped call's error: %v", dead.err)
		}
	default:
		t.Error("dropped call not answered")
	}
}

// TestBatcherCoalesces: calls made while the lane's batches are in flight
// share the next batch, each gets its own answer, and no batch exceeds
// MetaBatch ops.
func TestBatcherCoalesces(t *testing.T) {
	f := newFakeMaster()
	f.gate = make(chan struct{})
	for i := range 100 {
		if i%2 == 0 {
			f.exists[fmt.Sprintf("/f%d", i)] = true
		}
	}
	const maxOps = 16
	b := newBatcher(f, maxOps)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 100)
	names := make([]string, 100)
	stat := func(i int) {
		defer wg.Done()
		resp, err := b.Stat(ctx, &pb.StatRequest{Path: fmt.Sprintf("/f%d", i)})
		errs[i] = err
		if err == nil {
			names[i] = resp.Info.Name
		}
	}
	// Fill both in-flight slots, then queue the rest behind them.
	for i := range b.reads.inFlight {
		wg.Add(1)
		go stat(i)
		<-f.started
	}
	for i := b.reads.inFlight; i < 100; i++ {
		wg.Add(1)
		go stat(i)
	}
	waitQueued(t, b.reads, 100-b.reads.inFlight)
	close(f.gate)
	wg.Wait()
	for i := range 100 {
		switch {
		case i%2 == 0 && (errs[i] != nil || names[i] != fmt.Sprintf("f%d", i)):
			t.Errorf("stat %d: %q, %v", i, names[i], errs[i])
		case i%2 == 1 && !errors.Is(errs[i], fs.ErrNotExist):
			t.Errorf("stat %d of a missing file: %v", i, errs[i])
		}
	}
	batches, _ := f.record()
	ops := 0
	for _, bt := range batches {
		if len(bt) > maxOps {
			t.Errorf("batch of %d ops, limit %d", len(bt), maxOps)
		}
		ops += len(bt)
	}
	if ops != 100 || len(batches) > b.reads.inFlight+(100-b.reads.inFlight+maxOps-1)/maxOps {
		t.Errorf("%d ops in %d batches", ops, len(batches))
	}
}

func waitQueued(t *testing.T, l *lane, n int) {
	t.Helper()
	for {
		l.mu.Lock()
		q := len(l.queue)
		l.mu.Unlock()
		if q == n {
			return
		}
		if q > n {
			t.Fatalf("%d calls queued, want %d", q, n)
		}
		runtime.Gosched()
	}
}

// TestBatcherCanceledWhileQueued: a call whose context ends while it waits
// for a batch returns at once and is never sent.
func TestBatcherCanceledWhileQueued(t *testing.T) {
	f := newFakeMaster()
	f.gate = make(chan struct{})
	b := newBatcher(f, 256)
	var wg sync.WaitGroup
	for range b.writes.inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.Create(context.Background(), &pb.CreateRequest{Path: "/busy"})
		}()
		<-f.started
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Create(ctx, &pb.CreateRequest{Path: "/abandoned"})
		done <- err
	}()
	waitQueued(t, b.writes, 1)
	cancel()
	if err := <-done; chunkfs.KindOf(err) != chunkfs.KindUnavailable || !errors.Is(err, context.Canceled) {
		t.Errorf("canceled call: %v", err)
	}
	close(f.gate)
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.exists["/abandoned"] {
		t.Error("a call canceled while queued was sent")
	}
}

// TestBatcherCanceledWhileSent: a call whose context ends while its batch
// is at the master fails as unavailable with an unknown outcome, and the
// error still says the context was canceled, so that the mount answers an
// interrupted look-up with EINTR rather than EIO.
func TestBatcherCanceledWhileSent(t *testing.T) {
	f := newFakeMaster()
	f.exists["/a"] = true
	f.gate = make(chan struct{})
	b := newBatcher(f, 256)
	busy := make(chan error, 1)
	go func() {
		_, err := b.Stat(context.Background(), &pb.StatRequest{Path: "/a"})
		busy <- err
	}()
	<-f.started
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Stat(ctx, &pb.StatRequest{Path: "/a"})
		done <- err
	}()
	waitQueued(t, b.reads, 1)
	f.gate <- struct{}{} // the busy batch ends; the next one carries the call
	<-f.started
	cancel()
	err := <-done
	if chunkfs.KindOf(err) != chunkfs.KindUnavailable || !errors.Is(err, context.Canceled) {
		t.Errorf("call canceled while sent: %v", err)
	}
	close(f.gate)
	if err := <-busy; err != nil {
		t.Errorf("busy call: %v", err)
	}
}

// TestBatcherWithoutBatchRPC: against a master without the Batch RPC the
// batcher sends every call alone; MetaBatch 1 does so from the start.
func TestBatcherWithoutBatchRPC(t *testing.T) {
	f := newFakeMaster()
	f.noBatch = true
	f.exists["/a"] = true
	b := newBatcher(f, 256)
	for range 3 {
		if resp, err := b.Stat(context.Background(), &pb.StatRequest{Path: "/a"}); err != nil || resp.StateId != 3 {
			t.Fatalf("Stat = %v, %v", resp, err)
		}
	}
	if _, err := b.Create(context.Background(), &pb.CreateRequest{Path: "/n"}); err != nil {
		t.Fatal(err)
	}
	if batches, unary := f.record(); len(batches) != 0 || unary != 4 {
		t.Errorf("%d batches, %d unary calls", len(batches), unary)
	}

	f = newFakeMaster()
	f.exists["/a"] = true
	b = newBatcher(f, 1)
	if _, err := b.Stat(context.Background(), &pb.StatRequest{Path: "/a"}); err != nil {
		t.Fatal(err)
	}
	if batches, unary := f.record(); len(batches) != 0 || unary != 1 {
		t.Errorf("MetaBatch 1: %d batches, %d unary calls", len(batches), unary)
	}
}

// TestBatcherBadAnswers: a result of the wrong kind, and a batch answered
// short, are errors rather than panics or silent successes.
func TestBatcherBadAnswers(t *testing.T) {
	f := newFakeMaster()
	b := newBatcher(f, 256)
	if _, err := b.Mkdir(context.Background(), &pb.MkdirRequest{Path: "/d"}); chunkfs.KindOf(err) != chunkfs.KindOther {
		t.Errorf("wrong kind of result: %v", err)
	}
	short := &shortMaster{}
	b = newBatcher(short, 256)
	if _, err := b.Stat(context.Background(), &pb.StatRequest{Path: "/a"}); chunkfs.KindOf(err) != chunkfs.KindOther {
		t.Errorf("batch answered short: %v", err)
	}
	if err := resultErr(&pb.MetaResult{Result: &pb.MetaResult_Error{Error: &pb.ErrorDetail{Kind: 200, Message: "x"}}}); chunkfs.KindOf(err) != chunkfs.KindOther {
		t.Errorf("unknown kind: %v", err)
	}
}

type shortMaster struct{ pb.MasterClient }

func (shortMaster) Batch(context.Context, *pb.BatchRequest, ...grpc.CallOption) (*pb.BatchResponse, error) {
	return &pb.BatchResponse{}, nil
}

// TestBatcherRPCFailure: a failed Batch RPC fails every call in it with
// that error.
func TestBatcherRPCFailure(t *testing.T) {
	b := newBatcher(failingMaster{}, 256)
	_, err := b.Stat(context.Background(), &pb.StatRequest{Path: "/a"})
	if chunkfs.KindOf(err) != chunkfs.KindUnavailable {
		t.Errorf("Stat over a broken connection: %v", err)
	}
}

type failingMaster struct{ pb.MasterClient }

func (failingMaster) Batch(context.Context, *pb.BatchRequest, ...grpc.CallOption) (*pb.BatchResponse, error) {
	return nil, &chunkfs.Error{Kind: chunkfs.KindUnavailable, Err: status.Error(codes.Unavailable, "connection refused")}
}
