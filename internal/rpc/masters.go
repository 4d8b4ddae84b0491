package rpc

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// MasterSet is a connection to a group of masters for the Master service:
// pb.NewMasterClient(set) works as over one connection. Each call goes to
// the master believed to lead; when that master answers "not the leader"
// the call goes to the leader it names, and when it cannot be reached to
// the next master of the list, until one answers or the call's deadline
// passes. Any other answer, error or not, is the call's.
//
// A call is retried elsewhere only when it cannot have been applied: the
// refusing master was not the leader, or no master received it. A call
// whose connection broke after it was sent may have been applied by a
// leader that then failed; its retry can then find its own effect (a
// create finds the file existing), as NFS without a reply cache does.
type MasterSet struct {
	pool  *Pool
	addrs []string
	wait  func(context.Context, time.Duration) error // sleeps between rounds

	mu          sync.Mutex // guards current, readers, turn and leaderReads
	current     string     // the master calls go to first
	readers     []string   // observers that take coordinated reads
	turn        int        // the reader the next read goes to
	leaderReads bool       // every call is for the leader alone (SetLeaderReads)
}

// leaderOnlyKey is the metadata of a call that only the leader may answer.
const leaderOnlyKey = "chunkfs-leader-only"

// LeaderOnly reports whether an incoming call asks that only the leader
// answer it (a client reading from the leader only): any other master
// refuses it with "not the leader" and a hint, as it refuses a write.
func LeaderOnly(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	return ok && len(md.Get(leaderOnlyKey)) > 0
}

// SetLeaderReads makes every call, reads included, one only the leader
// answers. Without it a follower answers a read, so a set whose leader
// failed, having skipped to a follower, would keep reading from that
// follower until a write's "not the leader" moved it on.
func (s *MasterSet) SetLeaderReads(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaderReads = on
}

func (s *MasterSet) leaderOnly() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaderReads
}

var _ grpc.ClientConnInterface = (*MasterSet)(nil)

// NewMasterSet returns a set of the masters at addrs, which share pool's
// connections.
func NewMasterSet(pool *Pool, addrs []string) (*MasterSet, error) {
	if len(addrs) == 0 {
		return nil, chunkfs.E("dial", "", chunkfs.KindInvalid, "no master address")
	}
	return &MasterSet{pool: pool, addrs: slices.Clone(addrs), current: addrs[0], wait: sleepCtx}, nil
}

// SetReaders names the observers that serve coordinated reads (Stat,
// List, GetChunks and batches of stats): each read goes to one of them in
// turn, and to the leader when that observer cannot answer it (behind the
// client's state beyond its bound, no location known, unreachable).
// Reads carry the client's state ID, so a client reads its own writes.
func (s *MasterSet) SetReaders(addrs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readers = slices.Clone(addrs)
}

// reader returns the observer the next read goes to, if any.
func (s *MasterSet) reader() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.readers) == 0 {
		return ""
	}
	s.turn = (s.turn + 1) % len(s.readers)
	return s.readers[s.turn]
}

// coordinatedRead reports whether a call may be served by an observer.
func coordinatedRead(method string, args any) bool {
	switch MethodName(method) {
	case "Stat", "List", "GetChunks", "GetXattr", "ListXattr":
		return true
	case "Batch":
		b, ok := args.(*pb.BatchRequest)
		if !ok {
			return false
		}
		for _, op := range b.Ops {
			if op.GetStat() == nil {
				return false
			}
		}
		return len(b.Ops) > 0
	}
	return false
}

// Leader returns the master calls go to first: the last one that
// answered, or the leader one named.
func (s *MasterSet) Leader() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

func (s *MasterSet) setCurrent(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current = addr
}

// next returns the master after addr in the list (the first when addr is
// not in it).
func (s *MasterSet) next(addr string) string {
	i := slices.Index(s.addrs, addr)
	return s.addrs[(i+1)%len(s.addrs)]
}

// Invoke makes a unary call, following leader hints and skipping
// unreachable masters within ctx's deadline (DefaultTimeout when it has
// none).
func (s *MasterSet) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	if coordinatedRead(method, args) {
		if r := s.reader(); r != "" {
			err := s.invokeOne(ctx, r, method, args, reply, opts)
			if !s.observerCannot(err) {
				return err
			}
		}
	}
	if s.leaderOnly() {
		ctx = metadata.AppendToOutgoingContext(ctx, leaderOnlyKey, "1")
	}
	addr := s.Leader()
	for tried, backoff := 0, 10*time.Millisecond; ; {
		err := s.invokeOne(ctx, addr, method, args, reply, opts)
		if err == nil {
			s.setCurrent(addr)
			return nil
		}
		to, again := s.redirect(addr, err)
		if !again {
			return err
		}
		if tried++; tried%len(s.addrs) == 0 || to == addr {
			if werr := s.wait(ctx, backoff); werr != nil {
				return err
			}
			backoff = min(2*backoff, time.Second)
		}
		addr = to
	}
}

func (s *MasterSet) invokeOne(ctx context.Context, addr, method string, args, reply any, opts []grpc.CallOption) error {
	cc, err := s.pool.Conn(addr)
	if err != nil {
		return err
	}
	return cc.Invoke(ctx, method, args, reply, opts...)
}

// redirect decides where a call that failed at addr with err goes next:
// to the leader a "not the leader" answer names, or the next master when
// it names none or addr could not be reached. again is false when err is
// the call's answer.
func (s *MasterSet) redirect(addr string, err error) (to string, again bool) {
	switch {
	case chunkfs.KindOf(err) == chunkfs.KindNotLeader:
		var hint *chunkfs.LeaderHint
		if errors.As(err, &hint) && hint.Leader != "" && hint.Leader != addr {
			return hint.Leader, true
		}
		return s.next(addr), true
	case Unreachable(err):
		return s.next(addr), true
	}
	return "", false
}

// observerCannot reports whether an observer's answer to a read is its
// refusal to serve it, so the leader should: too far behind, a chunk it
// has no location for, not reachable.
func (s *MasterSet) observerCannot(err error) bool {
	switch chunkfs.KindOf(err) {
	case chunkfs.KindUnavailable, chunkfs.KindNotLeader:
		return true
	}
	return false
}

// NewStream is not used by the Master service, which is unary only.
func (s *MasterSet) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cc, err := s.pool.Conn(s.Leader())
	if err != nil {
		return nil, err
	}
	return cc.NewStream(ctx, desc, method, opts...)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
