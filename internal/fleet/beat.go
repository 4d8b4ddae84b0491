package fleet

import (
	"context"
	"slices"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// reportLoop waits phase, then registers and heartbeats every interval as
// the chunkserver's heartbeat loop does: registering again at once when
// the master asks (a failed registration is tried at the next tick),
// keeping its registration through failed calls.
func (s *server) reportLoop(ctx context.Context, phase time.Duration) {
	clk := s.f.cfg.Clock
	select {
	case <-clk.After(phase):
	case <-ctx.Done():
		return
	}
	t := clk.NewTicker(s.f.cfg.HeartbeatInterval)
	defer t.Stop()
	registered := false
	for {
		paused := s.f.paused.Load()
		if registered && !paused {
			registered = s.heartbeat(ctx)
		}
		if !registered && !paused {
			registered = s.register(ctx) == nil
		}
		select {
		case <-t.C():
		case <-ctx.Done():
			return
		}
	}
}

func (s *server) master() (pb.MasterClient, error) {
	return s.f.pool(s.index).Master(s.f.cfg.Master)
}

func (s *server) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.f.cfg.RPCTimeout)
}

// space is what the server reports of its one disk.
func (s *server) spaceLocked() (capacity, used, free int64, disks []*pb.Disk) {
	capacity, used = s.f.cfg.Capacity, s.used
	free = max(capacity-used, 0)
	return capacity, used, free, []*pb.Disk{{Id: s.id + "/disk", Capacity: capacity, Free: free}}
}

// leasesLocked lists the leases the server holds as primary now.
func (s *server) leasesLocked(now time.Time) []*pb.HeldLease {
	var out []*pb.HeldLease
	if !s.leaseEnd.After(now) {
		return nil // no lease is held: skip the walk
	}
	for _, h := range s.handlesLocked() {
		c := s.chunks[h]
		if c.until.After(now) {
			out = append(out, &pb.HeldLease{Handle: uint64(h), Version: uint64(c.version), RemainingMs: c.until.Sub(now).Milliseconds()})
		}
	}
	return out
}

func (s *server) registerRequest() (*pb.RegisterRequest, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := &pb.RegisterRequest{Id: s.id, Addr: s.addr, Leases: s.leasesLocked(s.f.cfg.Clock.Now())}
	req.Capacity, req.Used, req.Free, req.Disks = s.spaceLocked()
	hs := s.handlesLocked()
	req.Chunks = make([]*pb.ChunkReplica, len(hs))
	for i, h := range hs {
		c := s.chunks[h]
		req.Chunks[i] = &pb.ChunkReplica{Handle: uint64(h), Version: uint64(c.version), Length: c.length}
	}
	return req, len(hs)
}

// register sends a full chunk report and deletes what the master names
// garbage or stale.
func (s *server) register(ctx context.Context) error {
	req, n := s.registerRequest()
	m, err := s.master()
	if err != nil {
		return err
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	resp, err := m.Register(cctx, req)
	if err != nil {
		s.f.failed.Add(1)
		s.f.cfg.Logger.Debug("simulated chunkserver: register", "id", s.id, "err", err)
		return err
	}
	s.drop(resp.Garbage)
	s.drop(resp.Stale)
	s.f.regs.Add(1)
	if s.f.cfg.OnRegister != nil {
		s.f.cfg.OnRegister(s.index, n)
	}
	return nil
}

// heartbeatRequest lists the next ReportSize replicas after the cursor
// (wrapping) and the leases held.
func (s *server) heartbeatRequest(now time.Time) *pb.HeartbeatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := &pb.HeartbeatRequest{Id: s.id, Addr: s.addr, Leases: s.leasesLocked(now)}
	req.Capacity, req.Used, req.Free, req.Disks = s.spaceLocked()
	hs := s.handlesLocked()
	start, _ := slices.BinarySearch(hs, s.cursor+1)
	for i := 0; i < min(s.f.cfg.ReportSize, len(hs)); i++ {
		h := hs[(start+i)%len(hs)]
		c := s.chunks[h]
		req.Sample = append(req.Sample, &pb.ChunkReplica{Handle: uint64(h), Version: uint64(c.version), Length: c.length})
		s.cursor = h
	}
	return req
}

// heartbeat sends one heartbeat; it returns false if the master wants a
// new registration.
func (s *server) heartbeat(ctx context.Context) bool {
	now := s.f.cfg.Clock.Now()
	req := s.heartbeatRequest(now)
	m, err := s.master()
	if err != nil {
		return true
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	resp, err := m.Heartbeat(cctx, req)
	if err != nil {
		s.f.failed.Add(1)
		s.f.cfg.Logger.Debug("simulated chunkserver: heartbeat", "id", s.id, "err", err)
		return true
	}
	s.f.beats.Add(1)
	s.drop(resp.Garbage)
	s.extend(resp.Extended, now, time.Duration(resp.LeaseMs)*time.Millisecond)
	return !resp.Reregister
}

func (s *server) drop(handles []uint64) {
	if len(handles) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range handles {
		s.dropLocked(chunkfs.Handle(h))
	}
}

// extend extends the leases the master agreed to extend, from when the
// heartbeat was sent. A simulated server asks for none (it takes no
// mutations), but honours an answer that names some.
func (s *server) extend(handles []uint64, sent time.Time, d time.Duration) {
	if d <= 0 || len(handles) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range handles {
		if c := s.chunks[chunkfs.Handle(h)]; c != nil && c.until.After(sent) {
			c.until = sent.Add(d)
			s.leaseEnd = maxTime(s.leaseEnd, c.until)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
