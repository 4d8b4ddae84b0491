package chunkserver

import (
	"context"
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/token"
)

// maxDeleteBatch bounds the handles of one DeleteChunks request.
const maxDeleteBatch = 100000

// control implements the gRPC ChunkServer service.
type control struct {
	pb.UnimplementedChunkServerServer
	s *Server
}

// checkVersion fails with KindStale unless the stored replica of h is at v.
func (s *Server) checkVersion(op string, h chunkfs.Handle, v chunkfs.Version) error {
	in, err := s.store.Info(h)
	if err != nil {
		return err
	}
	if in.Version != v {
		return chunkfs.E(op, chunkName(h), chunkfs.KindStale, fmt.Sprintf("replica at version %d, request at %d", in.Version, v))
	}
	return nil
}

func invalid(op string, h chunkfs.Handle, msg string) error {
	return chunkfs.E(op, chunkName(h), chunkfs.KindInvalid, msg)
}

// checkSecondaries bounds a request's list of secondaries.
func checkSecondaries(op string, h chunkfs.Handle, addrs []string) error {
	if len(addrs) >= chunkfs.MaxReplication {
		return invalid(op, h, "too many secondaries")
	}
	for _, a := range addrs {
		if a == "" || len(a) > 255 {
			return invalid(op, h, "bad secondary address")
		}
	}
	return nil
}

// Lease sets a chunk's version (creating the chunk if asked) and makes this
// server its primary for lease_ms, or a secondary when lease_ms is 0.
func (c *control) Lease(ctx context.Context, req *pb.LeaseRequest) (*pb.LeaseResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := c.s.nodeOnly(ctx, "lease", chunkfs.Handle(req.Handle)); err != nil {
		return nil, err
	}
	h, v := chunkfs.Handle(req.Handle), chunkfs.Version(req.Version)
	if req.LeaseMs < 0 || req.LeaseMs > int64(10*time.Minute/time.Millisecond) {
		return nil, invalid("lease", h, "lease duration out of range")
	}
	st := c.s.state(h)
	st.order.Lock()
	defer st.order.Unlock()
	if err := c.s.setVersion(h, v, req.Create); err != nil {
		return nil, err
	}
	var until time.Time
	if req.LeaseMs > 0 {
		until = c.s.cfg.Clock.Now().Add(time.Duration(req.LeaseMs) * time.Millisecond)
	}
	st.grant(v, until)
	in, err := c.s.store.Info(h)
	if err != nil {
		return nil, err
	}
	return &pb.LeaseResponse{Length: in.Length}, nil
}

// setVersion moves chunk h to version v, creating it if create; a replica
// already newer than v makes the request stale.
func (s *Server) setVersion(h chunkfs.Handle, v chunkfs.Version, create bool) error {
	in, err := s.store.Info(h)
	if chunkfs.KindOf(err) == chunkfs.KindNotExist && create {
		return s.store.Create(h, v)
	}
	if err != nil {
		return err
	}
	switch {
	case in.Version > v:
		return chunkfs.E("lease", chunkName(h), chunkfs.KindStale, fmt.Sprintf("replica at version %d, newer than %d", in.Version, v))
	case in.Version < v:
		return s.store.SetVersion(h, v)
	}
	return nil
}

// Write applies pushed data at an offset as the chunk's primary.
func (c *control) Write(ctx context.Context, req *pb.WriteRequest) (*pb.WriteResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := c.s.authorize(ctx, "write", chunkfs.Handle(req.Handle), req.Token, token.Write); err != nil {
		return nil, err
	}
	h, v := chunkfs.Handle(req.Handle), chunkfs.Version(req.Version)
	if req.Offset < 0 || req.Length < 0 || req.Length > rpc.MaxPushSize || req.Offset > c.s.cfg.MaxChunkSize-req.Length {
		return nil, invalid("write", h, "offset or length out of range")
	}
	if err := checkSecondaries("write", h, req.Secondaries); err != nil {
		return nil, err
	}
	m := &pb.ApplyRequest{Handle: req.Handle, Version: req.Version, Offset: req.Offset, DataId: req.DataId, Length: req.Length}
	return &pb.WriteResponse{}, c.s.mutatePrimary(ctx, h, v, req.Secondaries, func(st *chunkState) (*pb.ApplyRequest, error) {
		return m, nil
	})
}

// Append appends pushed data as one record at an offset the primary picks.
// A record that does not fit fails with KindChunkFull; unless other
// records hold reservations in the chunk (Reserve), every replica first pads
// the chunk to its full size.
func (c *control) Append(ctx context.Context, req *pb.AppendRequest) (*pb.AppendResponse, error) {
	var off int64
	err := c.placeRecord(ctx, "append", req.Handle, req.Version, req.DataId, req.Length, req.ChunkSize, req.Secondaries, req.Token,
		func(st *chunkState, end int64, _ time.Time) (*pb.ApplyRequest, error) {
			delete(st.reserved, chunkfs.DataID(req.DataId)) // used up
			off = end
			return &pb.ApplyRequest{Handle: req.Handle, Version: req.Version, Offset: end, DataId: req.DataId, Length: req.Length}, nil
		})
	if err != nil {
		return nil, err
	}
	return &pb.AppendResponse{Offset: off}, nil
}

// Reserve reserves room in the chunk for a record about to be pushed, or
// refuses it with KindChunkFull (padding the chunk, as Append does, when no
// other record holds a reservation), so that a record that will not fit is
// never pushed.
func (c *control) Reserve(ctx context.Context, req *pb.ReserveRequest) (*pb.ReserveResponse, error) {
	err := c.placeRecord(ctx, "reserve", req.Handle, req.Version, req.DataId, req.Length, req.ChunkSize, req.Secondaries, req.Token,
		func(st *chunkState, _ int64, now time.Time) (*pb.ApplyRequest, error) {
			if len(st.reserved) >= maxReservations {
				return nil, chunkfs.E("reserve", chunkName(chunkfs.Handle(req.Handle)), chunkfs.KindChunkFull, fmt.Sprintf("%d reservations outstanding", len(st.reserved)))
			}
			st.reserveLocked(chunkfs.Version(req.Version), chunkfs.DataID(req.DataId), req.Length, now)
			return nil, nil
		})
	if err != nil {
		return nil, err
	}
	return &pb.ReserveResponse{}, nil
}

// placeRecord checks a request (op) about a record of length bytes, data
// id, for chunk h, then, as the chunk's primary with its order lock held,
// places it: if it fits beside the room other records reserved, fits gets
// the chunk's length and returns the mutation to apply (nil: none) or an
// error; if not, the answer is KindChunkFull, the chunk padded when no
// other record holds a reservation, and the record's own is dropped.
func (c *control) placeRecord(ctx context.Context, op string, handle, version, id uint64, length, chunkSize int64, secondaries []string, tok []byte,
	fits func(st *chunkState, end int64, now time.Time) (*pb.ApplyRequest, error)) error {
	done, err := c.s.enter()
	if err != nil {
		return err
	}
	defer done()
	if err := c.s.authorize(ctx, op, chunkfs.Handle(handle), tok, token.Write); err != nil {
		return err
	}
	h, v := chunkfs.Handle(handle), chunkfs.Version(version)
	if err := checkRecord(op, h, length, chunkSize, c.s.cfg.MaxChunkSize); err != nil {
		return err
	}
	if err := checkSecondaries(op, h, secondaries); err != nil {
		return err
	}
	var full error
	err = c.s.mutatePrimary(ctx, h, v, secondaries, func(st *chunkState) (*pb.ApplyRequest, error) {
		in, err := c.s.store.Info(h)
		if err != nil {
			return nil, err
		}
		now := c.s.cfg.Clock.Now()
		others := st.reservedLocked(v, chunkfs.DataID(id), now)
		if in.Length+length+others <= chunkSize {
			return fits(st, in.Length, now)
		}
		delete(st.reserved, chunkfs.DataID(id))
		var pad *pb.ApplyRequest
		pad, full = chunkFull(op, h, version, in.Length, others, chunkSize)
		return pad, nil
	})
	if err != nil {
		return err
	}
	return full
}

// chunkFull is the answer to a record that does not fit in a chunk of
// length bytes with others bytes reserved: the padding to apply when no
// reservation is outstanding, and KindChunkFull. With reservations it is not
// padded, so that the reserved records still fit; the chunk may then end
// short of its size, the rest reading as zeros up to the file's length.
func chunkFull(op string, h chunkfs.Handle, version uint64, length, others, chunkSize int64) (*pb.ApplyRequest, error) {
	if others > 0 {
		return nil, chunkfs.E(op, chunkName(h), chunkfs.KindChunkFull, fmt.Sprintf("record does not fit beside %d reserved bytes", others))
	}
	pad := &pb.ApplyRequest{Handle: uint64(h), Version: version, Offset: length, Length: max(0, chunkSize-length), Pad: true}
	return pad, chunkfs.E(op, chunkName(h), chunkfs.KindChunkFull, "record does not fit; chunk padded")
}

// checkRecord checks a record's length against its chunk's size.
func checkRecord(op string, h chunkfs.Handle, length, chunkSize, maxChunkSize int64) error {
	switch {
	case chunkSize <= 0 || chunkSize > maxChunkSize:
		return invalid(op, h, "chunk size out of range")
	case length < 0 || length > chunkfs.MaxRecordSize(chunkSize) || length > rpc.MaxPushSize:
		return chunkfs.E(op, chunkName(h), chunkfs.KindTooLarge, "record larger than a quarter of a chunk")
	}
	return nil
}

// mutatePrimary runs one mutation as chunk h's primary: with the chunk's
// order lock held it checks the lease and version, lets plan decide the
// mutation (none: plan returns nil), assigns it a serial number and applies
// it here and on every secondary in parallel, answering once all have
// applied it.
func (s *Server) mutatePrimary(ctx context.Context, h chunkfs.Handle, v chunkfs.Version, secondaries []string, plan func(*chunkState) (*pb.ApplyRequest, error)) error {
	st := s.state(h)
	st.order.Lock()
	defer st.order.Unlock()
	start := s.cfg.Clock.Now()
	if err := st.primaryFor(h, v, start); err != nil {
		return err
	}
	if err := s.checkVersion("mutate", h, v); err != nil {
		return err
	}
	m, err := plan(st)
	if err != nil || m == nil {
		return err // nil, nil: nothing to apply
	}
	data, sums, release, err := s.mutationData(m)
	if err != nil {
		return err
	}
	defer release()
	m.Serial = st.nextSerial(v)
	remote := s.applyRemote(ctx, secondaries, m)
	local := s.applyLocal(m, data, sums)
	for range secondaries {
		if rerr := <-remote; rerr != nil && local == nil {
			local = rerr
		}
	}
	if local != nil {
		return local
	}
	st.noteMutated()
	if s.cfg.OnMutation != nil {
		s.cfg.OnMutation(Mutation{Handle: h, Version: v, Serial: m.Serial, Start: start, End: s.cfg.Clock.Now()})
	}
	return nil
}

// mutationData takes the pushed data a mutation needs (none for padding)
// and its block sums if known; release recycles it once applied.
func (s *Server) mutationData(m *pb.ApplyRequest) (data []byte, sums []uint32, release func(), err error) {
	if m.Pad {
		return nil, nil, func() {}, nil
	}
	return s.buf.take(chunkfs.DataID(m.DataId), m.Length)
}

// applyLocal applies a mutation to the local replica. sums, if not nil,
// are the block sums of data checked on its arrival; they become the stored
// checksums where the write covers whole blocks, so the checksums kept are
// those the client computed.
func (s *Server) applyLocal(m *pb.ApplyRequest, data []byte, sums []uint32) error {
	h := chunkfs.Handle(m.Handle)
	var err error
	if m.Pad {
		err = s.store.Pad(h, m.Offset+m.Length)
	} else {
		err = s.store.WriteWithSums(h, m.Offset, data, sums)
	}
	if chunkfs.KindOf(err) == chunkfs.KindChecksum {
		s.reporter.corrupt(h)
	}
	return err
}

// applyRemote sends m to every secondary in parallel; the channel gets one
// result per secondary.
func (s *Server) applyRemote(ctx context.Context, secondaries []string, m *pb.ApplyRequest) <-chan error {
	out := make(chan error, len(secondaries))
	for _, addr := range secondaries {
		go func() {
			cs, err := s.peers.ChunkServer(addr)
			if err == nil {
				cctx, cancel := s.callCtx(ctx)
				_, err = cs.Apply(cctx, m)
				cancel()
			}
			if err != nil {
				err = fmt.Errorf("secondary %s: %w", addr, err)
			}
			out <- err
		}()
	}
	return out
}

// Apply applies one mutation ordered by the primary.
func (c *control) Apply(ctx context.Context, req *pb.ApplyRequest) (*pb.ApplyResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := c.s.nodeOnly(ctx, "apply", chunkfs.Handle(req.Handle)); err != nil {
		return nil, err
	}
	h, v := chunkfs.Handle(req.Handle), chunkfs.Version(req.Version)
	if req.Offset < 0 || req.Length < 0 || req.Length > c.s.cfg.MaxChunkSize || req.Offset > c.s.cfg.MaxChunkSize-req.Length || (!req.Pad && req.Length > rpc.MaxPushSize) {
		return nil, invalid("apply", h, "offset or length out of range")
	}
	st := c.s.state(h)
	st.order.Lock()
	defer st.order.Unlock()
	if err := c.s.checkVersion("apply", h, v); err != nil {
		return nil, err
	}
	if err := st.acceptSerial(h, v, req.Serial); err != nil {
		return nil, err
	}
	data, sums, release, err := c.s.mutationData(req)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := c.s.applyLocal(req, data, sums); err != nil {
		return nil, err
	}
	st.applied(req.Serial)
	return &pb.ApplyResponse{}, nil
}

// Sync makes this replica, then every secondary named, fsync the chunk.
func (c *control) Sync(ctx context.Context, req *pb.SyncRequest) (*pb.SyncResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := c.s.authorize(ctx, "sync", chunkfs.Handle(req.Handle), req.Token, token.Write); err != nil {
		return nil, err
	}
	h, v := chunkfs.Handle(req.Handle), chunkfs.Version(req.Version)
	if err := checkSecondaries("sync", h, req.Secondaries); err != nil {
		return nil, err
	}
	if err := c.s.checkVersion("sync", h, v); err != nil {
		return nil, err
	}
	remote := c.s.syncRemote(ctx, req)
	err = c.s.store.Sync(h)
	for range req.Secondaries {
		if rerr := <-remote; rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return nil, err
	}
	return &pb.SyncResponse{}, nil
}

func (s *Server) syncRemote(ctx context.Context, req *pb.SyncRequest) <-chan error {
	out := make(chan error, len(req.Secondaries))
	for _, addr := range req.Secondaries {
		go func() {
			cs, err := s.peers.ChunkServer(addr)
			if err == nil {
				cctx, cancel := s.callCtx(ctx)
				_, err = cs.Sync(cctx, &pb.SyncRequest{Handle: req.Handle, Version: req.Version, Token: req.Token})
				cancel()
			}
			out <- err
		}()
	}
	return out
}

// Truncate cuts a chunk to a length at a version the master has bumped.
func (c *control) Truncate(ctx context.Context, req *pb.TruncateRequest) (*pb.TruncateResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := c.s.nodeOnly(ctx, "truncate", chunkfs.Handle(req.Handle)); err != nil {
		return nil, err
	}
	h, v := chunkfs.Handle(req.Handle), chunkfs.Version(req.Version)
	if req.Length < 0 || req.Length > c.s.cfg.MaxChunkSize {
		return nil, invalid("truncate", h, "length out of range")
	}
	st := c.s.state(h)
	st.order.Lock()
	defer st.order.Unlock()
	if err := c.s.setVersion(h, v, false); err != nil {
		return nil, err
	}
	if err := c.s.store.Truncate(h, req.Length); err != nil {
		return nil, err
	}
	return &pb.TruncateResponse{}, nil
}

// ChunkInfo describes the replica and any lease held on it.
func (c *control) ChunkInfo(ctx context.Context, req *pb.ChunkInfoRequest) (*pb.ChunkInfoResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := c.s.authorize(ctx, "chunk info", chunkfs.Handle(req.Handle), req.Token, token.Read); err != nil {
		return nil, err
	}
	h := chunkfs.Handle(req.Handle)
	in, err := c.s.store.Info(h)
	if err != nil {
		return nil, err
	}
	if in.Corrupt {
		return nil, chunkfs.E("chunk info", chunkName(h), chunkfs.KindChecksum, "replica is corrupt")
	}
	now := c.s.cfg.Clock.Now()
	primary, until := c.s.state(h).lease(now)
	resp := &pb.ChunkInfoResponse{Version: uint64(in.Version), Length: in.Length, Primary: primary}
	if primary {
		resp.LeaseMs = until.Sub(now).Milliseconds()
	}
	return resp, nil
}

// DeleteChunks deletes replicas; unknown handles are ignored.
func (c *control) DeleteChunks(ctx context.Context, req *pb.DeleteChunksRequest) (*pb.DeleteChunksResponse, error) {
	done, err := c.s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	if err := c.s.nodeOnly(ctx, "delete chunks", 0); err != nil {
		return nil, err
	}
	if len(req.Handles) > maxDeleteBatch {
		return nil, chunkfs.E("delete chunks", "", chunkfs.KindTooLarge, "too many handles")
	}
	var first error // one replica that cannot be deleted does not keep the others
	for _, h := range req.Handles {
		if err := c.s.deleteChunk(chunkfs.Handle(h)); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	return &pb.DeleteChunksResponse{}, nil
}

// deleteChunk deletes a replica, waiting for a mutation in progress.
func (s *Server) deleteChunk(h chunkfs.Handle) error {
	st := s.state(h)
	st.order.Lock()
	defer st.order.Unlock()
	s.dropState(h)
	s.reporter.forget(h)
	err := s.store.Delete(h)
	if chunkfs.KindOf(err) == chunkfs.KindNotExist {
		return nil
	}
	if err == nil {
		s.reporter.noteDeleted(h)
	}
	return err
}
