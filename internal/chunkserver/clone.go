package chunkserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/token"
)

// clonePiece is how much of a chunk a clone asks its source for at a time,
// and, times the clone streams, the burst of the clone bandwidth cap
// (newCloneLimiter). A multiple of the block size,
// so every frame of the answer is one whole block and carries the
// source's stored CRC32C of that block.
const clonePiece = 1 << 20

// cloneOrder is a master's Clone: copy chunk Handle at Version from the
// replica at Source, which the master knows to hold Length bytes.
type cloneOrder struct {
	Handle  chunkfs.Handle
	Version chunkfs.Version
	Source  string // data-stream address of a replica holding Version
	Length  int64
	// Urgent: the chunk has no other live replica than the source; its
	// reads are not paced, and the source's other reads yield to them
	// (readPiece).
	Urgent bool
}

// cloneChunk makes this server a new replica of a chunk: it pulls the
// chunk from the source over the data stream, every block checked against
// the source's CRC32C on arrival, writes it under temporary names, fsyncs
// it and only then puts it in the store and answers with its length. On
// any failure nothing is kept. Clones are bounded in number (CloneStreams)
// and in bandwidth (CloneRate), both at this, the target, server.
func (s *Server) cloneChunk(ctx context.Context, o cloneOrder) (int64, error) {
	h, v := o.Handle, o.Version
	if err := s.checkClone(o); err != nil {
		return 0, err
	}
	end, err := s.clones.begin(h)
	if err != nil {
		return 0, err
	}
	defer end()
	n, err := s.clone(ctx, o)
	if err != nil {
		s.log.Warn("clone failed", "chunk", chunkName(h), "version", v, "source", o.Source, "err", err)
		return 0, err
	}
	s.log.Info("cloned", "chunk", chunkName(h), "version", v, "source", o.Source, "bytes", n)
	return n, nil
}

// checkClone refuses a clone order that cannot be right.
func (s *Server) checkClone(o cloneOrder) error {
	h := o.Handle
	switch {
	case o.Handle == 0:
		return invalid("clone", h, "zero handle")
	case o.Version == 0:
		return invalid("clone", h, "zero version")
	case o.Source == "" || len(o.Source) > 255:
		return invalid("clone", h, "bad source address")
	case o.Source == s.Addr():
		return invalid("clone", h, "source is this server")
	case o.Length < 0 || o.Length > s.cfg.MaxChunkSize:
		return invalid("clone", h, fmt.Sprintf("length %d out of range [0, %d]", o.Length, s.cfg.MaxChunkSize))
	}
	return nil
}

// clone pulls chunk o.Handle at o.Version from o.Source into a new
// replica and returns its length. The source must hold at least o.Length
// bytes.
func (s *Server) clone(ctx context.Context, o cloneOrder) (int64, error) {
	h, v, source, want := o.Handle, o.Version, o.Source, o.Length
	if _, err := s.sourceInfo(ctx, h, v, source); err != nil {
		return 0, err
	}
	in, err := s.store.BeginIncoming(h, v)
	if err != nil {
		return 0, err
	}
	defer in.Abort()
	ctx, cancel := context.WithCancel(ctx)
	pieces := make(chan clonedPiece, 1)
	free := make(chan []byte, 2) // one piece being written, one fetched
	free <- make([]byte, clonePiece)
	free <- make([]byte, clonePiece)
	go s.fetchPieces(ctx, o, pieces, free)
	defer func() {
		cancel()
		for range pieces { // wait for the fetcher to let go
		}
	}()
	for pc := range pieces {
		if werr := in.Write(pc.buf[:pc.n]); werr != nil {
			return 0, werr
		}
		switch {
		case errors.Is(pc.err, io.EOF):
		case pc.unpaid != nil:
			return 0, chunkfs.E("clone", chunkName(h), chunkfs.KindUnavailable, "cancelled: "+pc.unpaid.Error())
		case pc.err != nil:
			return 0, sourceError(h, source, pc.err)
		}
		free <- pc.buf
	}
	if in.Length() < want {
		return 0, chunkfs.E("clone", chunkName(h), chunkfs.KindStale, fmt.Sprintf("source %s holds %d bytes, fewer than the %d expected", source, in.Length(), want))
	}
	after, err := s.sourceInfo(ctx, h, v, source)
	if err != nil {
		return 0, err
	}
	if after.Length != in.Length() {
		return 0, chunkfs.E("clone", chunkName(h), chunkfs.KindStale, fmt.Sprintf("source %s changed during the clone (%d bytes, %d copied)", source, after.Length, in.Length()))
	}
	st := s.state(h)
	st.order.Lock() // no mutation of the replica replaced runs meanwhile
	defer st.order.Unlock()
	info, err := in.Commit()
	if err != nil {
		return 0, err
	}
	s.reporter.forget(h) // a corrupt replica it replaced was reported; this one is new
	return info.Length, nil
}

// clonedPiece is a piece of a clone as fetchPieces got it: n bytes of
// buf, and err, io.EOF when the chunk ended with it. unpaid is the error
// that ended the wait for the throttle after it (the clone was
// cancelled).
type clonedPiece struct {
	buf         []byte
	n           int
	err, unpaid error
}

// fetchPieces reads clone o's pieces from its source in order, from
// buffers taken from free, and sends them on out, one ahead of the clone
// writing them: the next piece crosses the network while the last is
// written and checked. It pays for each piece (the throttle) before it
// asks for the next, so the bytes pulled stay within the burst plus rate ×
// time. It stops after a piece that ends the chunk or fails, at the
// largest chunk size, or when ctx ends, and closes out.
func (s *Server) fetchPieces(ctx context.Context, o cloneOrder, out chan<- clonedPiece, free <-chan []byte) {
	defer close(out)
	send := func(pc clonedPiece) bool {
		select {
		case out <- pc:
			return pc.err == nil && pc.unpaid == nil
		case <-ctx.Done():
			return false
		}
	}
	for off := int64(0); off < s.cfg.MaxChunkSize; {
		var buf []byte
		select {
		case buf = <-free:
		case <-ctx.Done():
			return
		}
		p := buf[:min(int64(len(buf)), s.cfg.MaxChunkSize-off)]
		n, err := s.readPiece(ctx, o, off, p)
		pc := clonedPiece{buf: buf, n: n, err: err}
		if err == nil {
			pc.unpaid = s.clones.wait(ctx, int64(n))
		}
		if !send(pc) {
			return
		}
		off += int64(n)
	}
}

// sourceInfo asks the source about its replica of h, which must be at v
// exactly: a newer one would be copied under an older version's name.
// Asked before the copy and after it, so that a replica that grew
// meanwhile (the master let it be appended to at v during the clone) fails
// the clone rather than leaving a copy that misses the append; an
// overwrite in place at v is not seen, so the master clones only chunks
// no lease is writing.
func (s *Server) sourceInfo(ctx context.Context, h chunkfs.Handle, v chunkfs.Version, source string) (replicaState, error) {
	p, err := s.peer(source)
	if err != nil {
		return replicaState{}, sourceError(h, source, err)
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	info, err := p.chunkInfo(ctx, h, s.peerToken(h, token.Read))
	if err != nil {
		return replicaState{}, sourceError(h, source, err)
	}
	if info.Version != v {
		return replicaState{}, chunkfs.E("clone", chunkName(h)+" from "+source, chunkfs.KindStale, fmt.Sprintf("source holds version %d, not %d", info.Version, v))
	}
	return info, nil
}

// readPiece reads one piece from the source with a deadline of its own,
// so that a source that stops answering fails the clone in RPCTimeout
// rather than holding a clone slot until the master's deadline. It is a
// background read, which the source paces (its clone-source throttle),
// unless the clone is urgent: a chunk one failure from loss is not slowed
// for anyone, and the source's other reads, clients' and clones', yield
// to it (its UrgentYieldRate).
func (s *Server) readPiece(ctx context.Context, o cloneOrder, off int64, p []byte) (int, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	h, tok := o.Handle, s.peerToken(o.Handle, token.Read)
	if o.Urgent {
		return s.data.ReadUrgent(ctx, o.Source, h, o.Version, off, p, tok)
	}
	return s.data.ReadBackground(ctx, o.Source, h, o.Version, off, p, tok)
}

// sourceError describes a failed read from a clone's source, keeping its
// kind: KindStale (the source is older than the clone's version),
// KindChecksum (the source found its replica corrupt, or a block failed
// its checksum on the way), KindNotExist (the source holds no such chunk;
// nothing else makes Clone answer it, and the master forgets that
// replica), KindUnavailable.
func sourceError(h chunkfs.Handle, source string, err error) error {
	return &chunkfs.Error{Op: "clone", Path: chunkName(h) + " from " + source, Kind: chunkfs.KindOf(err), Err: err}
}

// cloneLimiter bounds this server's clones: how many run at once, one
// at most per chunk, and the bytes a second they pull together.
type cloneLimiter struct {
	clock clock.Clock
	max   int

	mu     sync.Mutex // guards active and bucket
	active map[chunkfs.Handle]bool
	bucket tokenBucket
}

// newCloneLimiter returns the limiter of a server running streams clones
// at once that pull rate bytes a second together (0: unlimited). The
// bucket holds a piece for every stream: a clone pays for a piece once it
// has it, so when every stream was slowed by its source (whose NIC clients
// share) they all pay at about the same time, and with one piece of credit
// all but one would then wait, leaving the credit of the slow spell unused
// and the clones below the rate.
func newCloneLimiter(c clock.Clock, streams int, rate int64) *cloneLimiter {
	return &cloneLimiter{clock: c, max: streams, active: make(map[chunkfs.Handle]bool),
		bucket: newTokenBucket(rate, int64(max(streams, 1))*clonePiece)}
}

// begin admits a clone of h, or refuses it with KindUnavailable when
// CloneStreams clones run already or one of h does.
func (l *cloneLimiter) begin(h chunkfs.Handle) (end func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.active[h]:
		return nil, chunkfs.E("clone", chunkName(h), chunkfs.KindUnavailable, "a clone of this chunk is in progress")
	case len(l.active) >= l.max:
		return nil, chunkfs.E("clone", chunkName(h), chunkfs.KindUnavailable, fmt.Sprintf("%d clones in progress; try later", len(l.active)))
	}
	l.active[h] = true
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.active, h)
	}, nil
}

// wait blocks until n more bytes may be pulled within the bandwidth cap.
func (l *cloneLimiter) wait(ctx context.Context, n int64) error {
	d := l.delay(l.clock.Now(), n)
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-l.clock.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// delay spends n bytes of the throttle's credit at now and returns how
// long the clone must wait before pulling them.
func (l *cloneLimiter) delay(now time.Time, n int64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bucket.take(now, n)
}
