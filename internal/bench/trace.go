package bench

import (
	"sync"
	"time"

	"github.com/chunkfs/chunkfs/client"
)

// Event is one step inside a client operation, as the client library's
// Trace reports it: a piece of a parallel region read (which replica,
// when, how long), a write or append attempt (its steps), a retry, a
// lease waited out. It shows where a slow operation spent its time.
type Event struct {
	What    string  `json:"what"`              // "read: piece", "write: attempt", "append: attempt", "retry", "lease wait"
	StartMS float64 `json:"start_ms"`          // from the point's first client start (in a Result: Unix ms)
	MS      float64 `json:"ms,omitempty"`      // how long it took (a lease wait: how long it waits)
	Replica string  `json:"replica,omitempty"` // the replica asked first
	Handle  uint64  `json:"handle,omitempty"`  // the chunk
	Offset  int     `json:"offset,omitempty"`  // a piece's offset in its region
	Bytes   int     `json:"bytes,omitempty"`   // a piece's size, an attempt's data
	Other   bool    `json:"other,omitempty"`   // served by another replica than Replica
	Err     string  `json:"err,omitempty"`     // the failure, if any
	// Note marks a rescued piece: "rescue" (read again from an idle
	// replica), "rescue, kept" (and that answer won), "rescued elsewhere"
	// (the first request, cancelled); of a retry, the operation retried.
	Note string `json:"note,omitempty"`
	// Steps are the parts of a write or append attempt (prepare, reserve,
	// push, wait, lease, write, append), in ms.
	Steps map[string]float64 `json:"steps,omitempty"`
}

// maxEvents bounds the events one worker reports.
const maxEvents = 4096

// traceRecorder keeps what a client's Trace reports about its reads, writes
// and appends as Events, at most maxEvents of them.
type traceRecorder struct {
	now func() time.Time // stamps events that carry no time of their own

	mu     sync.Mutex // guards events
	events []Event
}

func newTraceRecorder() *traceRecorder { return &traceRecorder{now: time.Now} }

// trace returns the hooks to install in a client's Config.
func (r *traceRecorder) trace() *client.Trace {
	return &client.Trace{
		WriteAttempt: func(a client.WriteAttempt) { r.add(attemptEvent(a)) },
		PieceRead:    func(p client.PieceRead) { r.add(pieceEvent(p)) },
		Retry: func(rt client.Retry) {
			r.add(Event{What: "retry", StartMS: unixMS(r.now()), Note: rt.Op, Err: errText(rt.Err)})
		},
		LeaseWait: func(w client.LeaseWait) {
			r.add(Event{What: "lease wait", StartMS: unixMS(r.now()), MS: durMS(w.Wait)})
		},
	}
}

func (r *traceRecorder) add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) < maxEvents {
		r.events = append(r.events, e)
	}
}

// take returns the events so far and forgets them.
func (r *traceRecorder) take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

func attemptEvent(a client.WriteAttempt) Event {
	e := Event{What: "write: attempt", StartMS: unixMS(a.Start), MS: durMS(a.Took), Handle: uint64(a.Handle), Bytes: a.Length, Err: errText(a.Err)}
	if len(a.Replicas) > 0 {
		e.Replica = a.Replicas[0]
	}
	apply := "write"
	if a.Append {
		e.What, apply = "append: attempt", "append"
	}
	steps := []struct {
		name string
		d    time.Duration
	}{{"prepare", a.Prepare}, {"reserve", a.Reserve}, {"push", a.Push}, {"wait", a.Wait}, {"lease", a.Lease}, {apply, a.Apply}}
	for _, s := range steps {
		if s.d > 0 {
			if e.Steps == nil {
				e.Steps = make(map[string]float64, len(steps))
			}
			e.Steps[s.name] = durMS(s.d)
		}
	}
	return e
}

func pieceEvent(p client.PieceRead) Event {
	return Event{What: "read: piece", StartMS: unixMS(p.Start), MS: durMS(p.Took), Replica: p.Replica, Handle: uint64(p.Handle),
		Offset: p.Offset, Bytes: p.Bytes, Other: p.Other, Note: p.Note, Err: errText(p.Err)}
}

func unixMS(t time.Time) float64    { return float64(t.UnixNano()) / 1e6 }
func durMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
