package chunkserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// maxDeleteBatch bounds the handles of one DeleteChunks request.
const maxDeleteBatch = 100000

// maxLeaseTerm bounds the lease a master may grant this server.
const maxLeaseTerm = 10 * time.Minute

// request is what a client asks of a chunk's primary: a Write of pushed
// data at Offset, an Append or a Reserve of a record in a chunk of
// ChunkSize, or a Sync. Length is the bytes written or appended.
type request struct {
	Handle      chunkfs.Handle
	Version     chunkfs.Version
	Offset      int64 // Write
	Length      int64
	ChunkSize   int64 // Append, Reserve
	Data        chunkfs.DataID
	Secondaries []string // addresses of the other replicas
	Token       []byte   // the client's chunk access token; nil from a node or on an insecure cluster
}

// mutation is one change of a replica that the primary orders (Serial)
// and every replica applies: the pushed data Data written at Offset, or,
// when Pad, zeros up to Offset+Length.
type mutation struct {
	Handle  chunkfs.Handle
	Version chunkfs.Version
	Serial  uint64
	Offset  int64
	Length  int64
	Data    chunkfs.DataID
	Pad     bool
}

// leaseGrant is a master's Lease: move the replica to Version (creating it
// if Create) and be its primary for Term (0: a secondary). A Term below 0
// is one the wire carried out of range.
type leaseGrant struct {
	Handle  chunkfs.Handle
	Version chunkfs.Version
	Create  bool
	Term    time.Duration
}

// truncation is a master's Truncate: cut the replica to Length at Version.
type truncation struct {
	Handle  chunkfs.Handle
	Version chunkfs.Version
	Length  int64
}

// replicaState is what ChunkInfo tells of a replica: its version and
// length, whether this server is its primary, for LeaseLeft more, and
// whether its last mutation failed for want of space (NoSpace).
type replicaState struct {
	Version   chunkfs.Version
	Length    int64
	Primary   bool
	LeaseLeft time.Duration
	NoSpace   bool
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

// lease sets a chunk's version (creating the chunk if asked) and makes
// this server its primary for g.Term, or a secondary when it is 0; it
// returns the replica's length.
func (s *Server) lease(g leaseGrant) (int64, error) {
	h, v := g.Handle, g.Version
	if g.Term < 0 || g.Term > maxLeaseTerm {
		return 0, invalid("lease", h, "lease duration out of range")
	}
	st := s.state(h)
	st.order.Lock()
	defer st.order.Unlock()
	if err := s.setVersion(h, v, g.Create); err != nil {
		return 0, err
	}
	var until time.Time
	if g.Term > 0 {
		until = s.cfg.Clock.Now().Add(g.Term)
	}
	st.grant(v, until)
	in, err := s.store.Info(h)
	if err != nil {
		return 0, err
	}
	return in.Length, nil
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

// write applies pushed data at an offset as the chunk's primary.
func (s *Server) write(ctx context.Context, r request) error {
	h := r.Handle
	if r.Offset < 0 || r.Length < 0 || r.Length > rpc.MaxPushSize || r.Offset > s.cfg.MaxChunkSize-r.Length {
		return invalid("write", h, "offset or length out of range")
	}
	if err := checkSecondaries("write", h, r.Secondaries); err != nil {
		return err
	}
	m := mutation{Handle: h, Version: r.Version, Offset: r.Offset, Data: r.Data, Length: r.Length}
	return s.mutatePrimary(ctx, h, r.Version, r.Secondaries, func(st *chunkState) (*mutation, error) {
		return &m, nil
	})
}

// appendRecord appends pushed data as one record at an offset the primary
// picks, and returns the offset. A record that does not fit fails with
// KindChunkFull; unless other records hold reservations in the chunk
// (reserve), every replica first pads the chunk to its full size.
func (s *Server) appendRecord(ctx context.Context, r request) (int64, error) {
	var off int64
	err := s.placeRecord(ctx, "append", r, func(st *chunkState, end int64, _ time.Time) (*mutation, error) {
		delete(st.reserved, r.Data) // used up
		off = end
		return &mutation{Handle: r.Handle, Version: r.Version, Offset: end, Data: r.Data, Length: r.Length}, nil
	})
	if err != nil {
		return 0, err
	}
	return off, nil
}

// reserve reserves room in the chunk for a record about to be pushed, or
// refuses it with KindChunkFull (padding the chunk, as appendRecord does,
// when no other record holds a reservation), so that a record that will
// not fit is never pushed.
func (s *Server) reserve(ctx context.Context, r request) error {
	return s.placeRecord(ctx, "reserve", r, func(st *chunkState, _ int64, now time.Time) (*mutation, error) {
		if len(st.reserved) >= maxReservations {
			return nil, chunkfs.E("reserve", chunkName(r.Handle), chunkfs.KindChunkFull, fmt.Sprintf("%d reservations outstanding", len(st.reserved)))
		}
		st.reserveLocked(r.Version, r.Data, r.Length, now)
		return nil, nil
	})
}

// placeRecord checks a request (op) about a record of r.Length bytes,
// then, as the chunk's primary with its order lock held, places it: if it
// fits beside the room other records reserved, fits gets the chunk's
// length and returns the mutation to apply (nil: none) or an error; if
// not, the answer is KindChunkFull, the chunk padded when no other record
// holds a reservation, and the record's own is dropped.
func (s *Server) placeRecord(ctx context.Context, op string, r request,
	fits func(st *chunkState, end int64, now time.Time) (*mutation, error)) error {
	h, v := r.Handle, r.Version
	if err := checkRecord(op, h, r.Length, r.ChunkSize, s.cfg.MaxChunkSize); err != nil {
		return err
	}
	if err := checkSecondaries(op, h, r.Secondaries); err != nil {
		return err
	}
	var full error
	err := s.mutatePrimary(ctx, h, v, r.Secondaries, func(st *chunkState) (*mutation, error) {
		in, err := s.store.Info(h)
		if err != nil {
			return nil, err
		}
		now := s.cfg.Clock.Now()
		others := st.reservedLocked(v, r.Data, now)
		if in.Length+r.Length+others <= r.ChunkSize {
			return fits(st, in.Length, now)
		}
		delete(st.reserved, r.Data)
		var pad *mutation
		pad, full = chunkFull(op, h, v, in.Length, others, r.ChunkSize)
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
func chunkFull(op string, h chunkfs.Handle, v chunkfs.Version, length, others, chunkSize int64) (*mutation, error) {
	if others > 0 {
		return nil, chunkfs.E(op, chunkName(h), chunkfs.KindChunkFull, fmt.Sprintf("record does not fit beside %d reserved bytes", others))
	}
	pad := &mutation{Handle: h, Version: v, Offset: length, Length: max(0, chunkSize-length), Pad: true}
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
// applied it, within the lease.
func (s *Server) mutatePrimary(ctx context.Context, h chunkfs.Handle, v chunkfs.Version, secondaries []string, plan func(*chunkState) (*mutation, error)) error {
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
	data, sums, release, err := s.mutationData(*m)
	if err != nil {
		return err
	}
	defer release()
	m.Serial = st.nextSerial(v)
	remote := s.applyRemote(ctx, secondaries, *m)
	local := s.applyLocal(st, *m, data, sums)
	for range secondaries {
		if rerr := <-remote; rerr != nil && local == nil {
			local = rerr
		}
	}
	if local != nil {
		return local
	}
	// A mutation acknowledged after the lease ended could be missed by a
	// clone the master started once it saw the lease end: the master
	// counts it ended a slack after this server does, and plans clones of
	// chunks under no lease. One that outlived the lease fails, as any
	// failed mutation, its region undefined; the writer retries under a
	// new lease.
	if err := st.primaryFor(h, v, s.cfg.Clock.Now()); err != nil {
		return chunkfs.E("mutate", chunkName(h), chunkfs.KindNotPrimary, "the lease ended while the mutation ran; retry")
	}
	st.noteMutated()
	if s.cfg.OnMutation != nil {
		s.cfg.OnMutation(Mutation{Handle: h, Version: v, Serial: m.Serial, Start: start, End: s.cfg.Clock.Now()})
	}
	return nil
}

// mutationData takes the pushed data a mutation needs (none for padding)
// and its block sums if known; release recycles it once applied.
func (s *Server) mutationData(m mutation) (data []byte, sums []uint32, release func(), err error) {
	if m.Pad {
		return nil, nil, func() {}, nil
	}
	return s.buf.take(m.Data, m.Length)
}

// applyLocal applies a mutation to the local replica (st its state).
// sums, if not nil, are the block sums of data checked on its arrival;
// they become the stored checksums where the write covers whole blocks, so
// the checksums kept are those the client computed. A failure for want of
// space is noted for ChunkInfo: the master, probing the replicas after the
// writer's failure, takes this one out of the lease.
func (s *Server) applyLocal(st *chunkState, m mutation, data []byte, sums []uint32) error {
	var err error
	if m.Pad {
		err = s.store.Pad(m.Handle, m.Offset+m.Length)
	} else {
		err = s.store.WriteWithSums(m.Handle, m.Offset, data, sums)
	}
	switch {
	case err == nil:
		st.noteNoSpace(time.Time{})
	case chunkfs.KindOf(err) == chunkfs.KindChecksum:
		s.reporter.corrupt(m.Handle)
	case chunkfs.KindOf(err) == chunkfs.KindNoSpace:
		st.noteNoSpace(s.cfg.Clock.Now())
	}
	return err
}

// applyRemote sends m to every secondary in parallel; the channel gets one
// result per secondary.
func (s *Server) applyRemote(ctx context.Context, secondaries []string, m mutation) <-chan error {
	return s.toSecondaries(ctx, secondaries, func(ctx context.Context, p peerLink) error { return p.apply(ctx, m) })
}

// toSecondaries makes call to every secondary in parallel, each with a
// deadline of its own; the channel gets one result per secondary, an
// error naming the secondary.
func (s *Server) toSecondaries(ctx context.Context, secondaries []string, call func(context.Context, peerLink) error) <-chan error {
	out := make(chan error, len(secondaries))
	for _, addr := range secondaries {
		go func() {
			p, err := s.peer(addr)
			if err == nil {
				cctx, cancel := s.callCtx(ctx)
				err = call(cctx, p)
				cancel()
			}
			if err != nil {
				err = atSecondary(addr, err)
			}
			out <- err
		}()
	}
	return out
}

// atSecondary names secondary addr in err, its call's failure, keeping its
// kind, operation and path. The wire carries a chunkfs error's own fields
// and cause's message alone, so the name goes in the cause: a wrap around
// the error would not reach the client.
func atSecondary(addr string, err error) error {
	var e *chunkfs.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("secondary %s: %w", addr, err)
	}
	cause := e.Err
	if cause == nil {
		cause = errors.New(e.Kind.String())
	}
	return &chunkfs.Error{Op: e.Op, Path: e.Path, Kind: e.Kind, Err: fmt.Errorf("secondary %s: %w", addr, cause)}
}

// apply applies one mutation ordered by the primary, as a secondary.
func (s *Server) apply(m mutation) error {
	h, v := m.Handle, m.Version
	if m.Offset < 0 || m.Length < 0 || m.Length > s.cfg.MaxChunkSize || m.Offset > s.cfg.MaxChunkSize-m.Length || (!m.Pad && m.Length > rpc.MaxPushSize) {
		return invalid("apply", h, "offset or length out of range")
	}
	st := s.state(h)
	st.order.Lock()
	defer st.order.Unlock()
	if err := s.checkVersion("apply", h, v); err != nil {
		return err
	}
	if err := st.acceptSerial(h, v, m.Serial); err != nil {
		return err
	}
	data, sums, release, err := s.mutationData(m)
	if err != nil {
		return err
	}
	defer release()
	if err := s.applyLocal(st, m, data, sums); err != nil {
		return err
	}
	st.applied(m.Serial)
	return nil
}

// sync makes this replica, then every secondary named, fsync the chunk.
func (s *Server) sync(ctx context.Context, r request) error {
	h, v := r.Handle, r.Version
	if err := checkSecondaries("sync", h, r.Secondaries); err != nil {
		return err
	}
	if err := s.checkVersion("sync", h, v); err != nil {
		return err
	}
	remote := s.toSecondaries(ctx, r.Secondaries, func(ctx context.Context, p peerLink) error { return p.sync(ctx, r) })
	err := s.store.Sync(h)
	for range r.Secondaries {
		if rerr := <-remote; rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// truncate cuts a chunk to a length at a version the master has bumped.
func (s *Server) truncate(t truncation) error {
	h := t.Handle
	if t.Length < 0 || t.Length > s.cfg.MaxChunkSize {
		return invalid("truncate", h, "length out of range")
	}
	st := s.state(h)
	st.order.Lock()
	defer st.order.Unlock()
	if err := s.setVersion(h, t.Version, false); err != nil {
		return err
	}
	return s.store.Truncate(h, t.Length)
}

// replicaState describes the replica of h and any lease held on it.
func (s *Server) replicaState(h chunkfs.Handle) (replicaState, error) {
	in, err := s.store.Info(h)
	if err != nil {
		return replicaState{}, err
	}
	if in.Corrupt {
		return replicaState{}, chunkfs.E("chunk info", chunkName(h), chunkfs.KindChecksum, "replica is corrupt")
	}
	now := s.cfg.Clock.Now()
	primary, until := s.state(h).lease(now)
	r := replicaState{Version: in.Version, Length: in.Length, Primary: primary, NoSpace: s.state(h).outOfSpace(now)}
	if primary {
		r.LeaseLeft = until.Sub(now)
	}
	return r, nil
}

// deleteChunks deletes replicas; unknown handles are ignored.
func (s *Server) deleteChunks(hs []chunkfs.Handle) error {
	if len(hs) > maxDeleteBatch {
		return chunkfs.E("delete chunks", "", chunkfs.KindTooLarge, "too many handles")
	}
	var first error // one replica that cannot be deleted does not keep the others
	for _, h := range hs {
		if err := s.deleteChunk(h); err != nil && first == nil {
			first = err
		}
	}
	return first
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
