package client

import (
	"time"

	"github.com/chunkfs/chunkfs"
)

// Trace is a set of hooks a Client calls as its data path runs, as
// net/http/httptrace's ClientTrace does for HTTP: each field, when not
// nil, is called once per event, synchronously, from the goroutine that
// did the work (so concurrently for a File's flushes in flight and a
// read's parallel pieces: a hook must be safe for concurrent use and
// quick). The events carry copies: a hook may keep them.
//
// A Trace is installed per Client (Config.Trace), not per context: a
// File's io methods run under the context it was opened with, and the
// tools that trace (the benchmark's workers, a diagnostic mount) want
// every operation of a client. A Client without a Trace pays one nil
// check per event and reads no clock for it.
//
// Times (Start, Took and the steps) are the Client's clock (Config.Clock)
// for writes, appends, pushes and lease waits, and real time for read
// pieces, whose scheduling follows the network's real rates.
type Trace struct {
	// WriteAttempt is called after each attempt to write data into one
	// chunk or to append one record, successful or not.
	WriteAttempt func(WriteAttempt)
	// Push is called after each push of a write's or record's data along
	// its chain of replicas.
	Push func(Push)
	// PieceRead is called after each piece of a parallel read: a region
	// of 1 MiB or more is read in pieces from several replicas at once.
	// A smaller read, from one replica in turn, is not reported.
	PieceRead func(PieceRead)
	// Retry is called when a failed read, write or append is tried again:
	// after its back-off, before the next attempt (which may go to other
	// replicas, a new primary or the file's next chunk).
	Retry func(Retry)
	// LeaseWait is called before a write or append waits out a lease that
	// is about to end, so that the next one the master grants is new.
	LeaseWait func(LeaseWait)
}

// WriteAttempt is one attempt of a write into one chunk, or of one record
// append.
type WriteAttempt struct {
	Path   string
	Index  int64          // the chunk's index in the file
	Handle chunkfs.Handle // the chunk; 0 if the master gave no lease
	// Offset is where in the chunk the data goes: for a write the offset
	// asked for, for an append the one the primary chose (-1 if the append
	// failed).
	Offset   int64
	Length   int      // bytes of data (of a record: with its frame)
	Append   bool     // a record append, not a write
	Primary  string   // the primary the mutation went to ("" if none)
	Replicas []string // the chain the data was pushed along, in order
	Start    time.Time
	Took     time.Duration
	// The attempt's steps, zero for those not reached: Prepare (the lease
	// from the master or the cache), Reserve (room at the primary, appends
	// of large records), Push (the data along the chain), Wait (for the
	// previous flush of the file to apply), Lease (a fresh lease after a
	// long push) and Apply (the Write or Append at the primary and its
	// secondaries).
	Prepare, Reserve, Push, Wait, Lease, Apply time.Duration
	Err                                        error // nil if the attempt succeeded
}

// Push is one push of data along a chain of replicas.
type Push struct {
	Handle   chunkfs.Handle
	Replicas []string // the chain, first the replica the client sends to
	Bytes    int
	Start    time.Time
	Took     time.Duration
	Err      error
}

// PieceRead is one piece of a read region, read from one replica (or, if
// it failed, the next ones in turn).
type PieceRead struct {
	Handle  chunkfs.Handle
	Replica string // the replica asked first
	Offset  int    // the piece's offset in its region
	Bytes   int
	Start   time.Time
	Took    time.Duration
	Other   bool // another replica than Replica served it
	// Note marks a rescued piece: "rescue" (read again from an idle
	// replica), "rescue, kept" (and that answer won), "rescued elsewhere"
	// (the first request, cancelled).
	Note string
	Err  error
}

// Retry is a failed read, write or append about to be tried again.
type Retry struct {
	Op    string // "read", "write" or "append"
	Path  string
	Index int64 // the chunk's index in the file
	Err   error // why the attempt failed
}

// LeaseWait is a lease too close to its end to be used, waited out.
type LeaseWait struct {
	Path  string
	Index int64
	Left  time.Duration // what was left of the lease
	Wait  time.Duration // how long the client waits
}

// tracing returns the client's Trace, nil if it has none.
func (c *Client) tracing() *Trace { return c.cfg.Trace }

// traceRetry tells the trace that op on chunk idx of path failed with err
// and is tried again.
func (c *Client) traceRetry(op, path string, idx int64, err error) {
	if t := c.tracing(); t != nil && t.Retry != nil {
		t.Retry(Retry{Op: op, Path: path, Index: idx, Err: err})
	}
}

// stepTimer times the steps of a write or append attempt on the client's
// clock, and only when a Trace wants them: without one it reads no clock.
type stepTimer struct {
	c    *Client
	on   bool
	last time.Time
}

func (c *Client) newStepTimer() stepTimer {
	t := c.tracing()
	if t == nil || (t.WriteAttempt == nil && t.Push == nil) {
		return stepTimer{}
	}
	return stepTimer{c: c, on: true, last: c.clock.Now()}
}

// step returns the time since the previous step (or the start) and adds
// it to *d; it does nothing when off.
func (s *stepTimer) step(d *time.Duration) time.Duration {
	if !s.on {
		return 0
	}
	now := s.c.clock.Now()
	took := now.Sub(s.last)
	s.last = now
	*d += took
	return took
}

// tracePush reports a push that took took and ended now (the timer's last
// step).
func (s *stepTimer) tracePush(loc *chunkLoc, n int, took time.Duration, err error) {
	if !s.on || s.c.cfg.Trace.Push == nil {
		return
	}
	s.c.cfg.Trace.Push(Push{Handle: loc.handle, Replicas: append([]string(nil), loc.replicas...), Bytes: n,
		Start: s.last.Add(-took), Took: took, Err: err})
}

// finish reports the attempt ev, made under the lease loc (nil if none
// was had), that ended with err.
func (s *stepTimer) finish(ev *WriteAttempt, loc *chunkLoc, err error) {
	if !s.on || s.c.cfg.Trace.WriteAttempt == nil {
		return
	}
	if loc != nil {
		ev.Handle, ev.Primary, ev.Replicas = loc.handle, loc.primary, append([]string(nil), loc.replicas...)
	}
	ev.Took, ev.Err = s.c.clock.Now().Sub(ev.Start), err
	s.c.cfg.Trace.WriteAttempt(*ev)
}
