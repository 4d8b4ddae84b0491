package fleet

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// maxLease bounds a lease the master may grant, as the chunkserver does.
const maxLease = 10 * time.Minute

// maxDeleteBatch bounds one DeleteChunks request, as the chunkserver does.
const maxDeleteBatch = 100000

// held is what a simulated server keeps of one replica.
type held struct {
	version chunkfs.Version
	length  int64
	until   time.Time // end of the lease this server holds as primary; zero: none
}

// server is one simulated chunkserver: the one owner of its replicas.
type server struct {
	pb.UnimplementedChunkServerServer
	f     *Fleet
	index int
	id    string
	addr  string
	srv   *rpc.Server

	mu     sync.Mutex // guards chunks, sorted, dirty, used, cursor and leaseEnd
	chunks map[chunkfs.Handle]*held
	sorted []chunkfs.Handle // chunks' handles in order, when !dirty
	dirty  bool
	used   int64          // bytes of the replicas' lengths
	cursor chunkfs.Handle // last handle of the previous heartbeat's sample
	// leaseEnd is the latest end of any lease granted: none is held after it.
	leaseEnd time.Time
}

func newServer(f *Fleet, i int, lis net.Listener) *server {
	s := &server{f: f, index: i, id: fmt.Sprintf("%s%d", f.cfg.IDPrefix, i), addr: lis.Addr().String(),
		chunks: make(map[chunkfs.Handle]*held)}
	s.srv = rpc.NewServer(f.cfg.Logger)
	pb.RegisterChunkServerServer(s.srv, s)
	return s
}

func (s *server) hold(reps []Replica) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range reps {
		s.putLocked(r.Handle, &held{version: r.Version, length: r.Length})
	}
}

func (s *server) putLocked(h chunkfs.Handle, c *held) {
	if old := s.chunks[h]; old != nil {
		s.used -= old.length
	} else {
		s.dirty = true
	}
	s.chunks[h] = c
	s.used += c.length
}

func (s *server) dropLocked(h chunkfs.Handle) {
	if old := s.chunks[h]; old != nil {
		s.used -= old.length
		delete(s.chunks, h)
		s.dirty = true
	}
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.chunks)
}

// handlesLocked returns the held handles in order.
func (s *server) handlesLocked() []chunkfs.Handle {
	if s.dirty || s.sorted == nil {
		s.sorted = s.sorted[:0]
		for h := range s.chunks {
			s.sorted = append(s.sorted, h)
		}
		slices.Sort(s.sorted)
		s.dirty = false
	}
	return s.sorted
}

func (s *server) list() []Replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	hs := s.handlesLocked()
	out := make([]Replica, len(hs))
	for i, h := range hs {
		c := s.chunks[h]
		out[i] = Replica{Handle: h, Version: c.version, Length: c.length}
	}
	return out
}

func (s *server) wrote(h chunkfs.Handle, length int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chunks[h]
	if c == nil {
		return chunkfs.E("write", s.addr, chunkfs.KindNotExist, fmt.Sprintf("chunk %d not held", h))
	}
	s.used += length - c.length
	c.length = length
	return nil
}

func (s *server) invalid(op string, h chunkfs.Handle, msg string) error {
	return chunkfs.E(op, fmt.Sprintf("%s chunk %d", s.id, h), chunkfs.KindInvalid, msg)
}

// setVersionLocked moves replica h to version v, creating it if create; a
// replica newer than v makes the request stale (the chunkserver's rule).
func (s *server) setVersionLocked(op string, h chunkfs.Handle, v chunkfs.Version, create bool) (*held, error) {
	c := s.chunks[h]
	switch {
	case c == nil && create:
		c = &held{version: v}
		s.putLocked(h, c)
		return c, nil
	case c == nil:
		return nil, chunkfs.E(op, fmt.Sprintf("%s chunk %d", s.id, h), chunkfs.KindNotExist, "replica not held")
	case c.version > v:
		return nil, chunkfs.E(op, fmt.Sprintf("%s chunk %d", s.id, h), chunkfs.KindStale, fmt.Sprintf("replica at version %d, newer than %d", c.version, v))
	}
	c.version = v
	return c, nil
}

// Lease sets a replica's version (creating it if asked) and makes this
// server its primary for lease_ms, or a secondary when lease_ms is 0.
func (s *server) Lease(ctx context.Context, req *pb.LeaseRequest) (*pb.LeaseResponse, error) {
	h := chunkfs.Handle(req.Handle)
	if req.LeaseMs < 0 || req.LeaseMs > maxLease.Milliseconds() {
		return nil, s.invalid("lease", h, "lease duration out of range")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.setVersionLocked("lease", h, chunkfs.Version(req.Version), req.Create)
	if err != nil {
		return nil, err
	}
	c.until = time.Time{}
	if req.LeaseMs > 0 {
		c.until = s.f.cfg.Clock.Now().Add(time.Duration(req.LeaseMs) * time.Millisecond)
		s.leaseEnd = maxTime(s.leaseEnd, c.until)
	}
	return &pb.LeaseResponse{Length: c.length}, nil
}

// Truncate cuts a replica to length at a version the master has bumped.
func (s *server) Truncate(ctx context.Context, req *pb.TruncateRequest) (*pb.TruncateResponse, error) {
	h := chunkfs.Handle(req.Handle)
	if req.Length < 0 {
		return nil, s.invalid("truncate", h, "length out of range")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.setVersionLocked("truncate", h, chunkfs.Version(req.Version), false)
	if err != nil {
		return nil, err
	}
	s.used += min(req.Length, c.length) - c.length
	c.length = min(req.Length, c.length)
	return &pb.TruncateResponse{}, nil
}

// ChunkInfo describes a replica and any lease held on it.
func (s *server) ChunkInfo(ctx context.Context, req *pb.ChunkInfoRequest) (*pb.ChunkInfoResponse, error) {
	h := chunkfs.Handle(req.Handle)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chunks[h]
	if c == nil {
		return nil, chunkfs.E("chunk info", fmt.Sprintf("%s chunk %d", s.id, h), chunkfs.KindNotExist, "replica not held")
	}
	resp := &pb.ChunkInfoResponse{Version: uint64(c.version), Length: c.length}
	if now := s.f.cfg.Clock.Now(); c.until.After(now) {
		resp.Primary, resp.LeaseMs = true, c.until.Sub(now).Milliseconds()
	}
	return resp, nil
}

// DeleteChunks drops replicas; unknown handles are ignored.
func (s *server) DeleteChunks(ctx context.Context, req *pb.DeleteChunksRequest) (*pb.DeleteChunksResponse, error) {
	if len(req.Handles) > maxDeleteBatch {
		return nil, chunkfs.E("delete chunks", s.id, chunkfs.KindTooLarge, "too many handles")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range req.Handles {
		s.dropLocked(chunkfs.Handle(h))
	}
	return &pb.DeleteChunksResponse{}, nil
}

// Clone records the replica at the version and length the master names:
// a simulated server pulls no bytes. A replica held at that version or a
// newer one is kept.
func (s *server) Clone(ctx context.Context, req *pb.CloneRequest) (*pb.CloneResponse, error) {
	h, v := chunkfs.Handle(req.Handle), chunkfs.Version(req.Version)
	if req.Length < 0 || req.Source == "" {
		return nil, s.invalid("clone", h, "no source or a negative length")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.chunks[h]; c != nil && c.version >= v {
		return &pb.CloneResponse{Length: c.length}, nil
	}
	s.putLocked(h, &held{version: v, length: req.Length})
	return &pb.CloneResponse{Length: req.Length}, nil
}

func (s *server) noData(op string) error {
	return chunkfs.E(op, s.id, chunkfs.KindNotSupported, "a simulated chunkserver holds no data")
}

// Write is refused: a simulated server holds no data.
func (s *server) Write(context.Context, *pb.WriteRequest) (*pb.WriteResponse, error) {
	return nil, s.noData("write")
}

// Append is refused: a simulated server holds no data.
func (s *server) Append(context.Context, *pb.AppendRequest) (*pb.AppendResponse, error) {
	return nil, s.noData("append")
}

// Reserve is refused: a simulated server holds no data.
func (s *server) Reserve(context.Context, *pb.ReserveRequest) (*pb.ReserveResponse, error) {
	return nil, s.noData("reserve")
}

// Apply is refused: a simulated server holds no data.
func (s *server) Apply(context.Context, *pb.ApplyRequest) (*pb.ApplyResponse, error) {
	return nil, s.noData("apply")
}

// Sync is refused: a simulated server holds no data.
func (s *server) Sync(context.Context, *pb.SyncRequest) (*pb.SyncResponse, error) {
	return nil, s.noData("sync")
}
