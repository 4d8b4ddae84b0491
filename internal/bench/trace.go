package bench

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Event is one step inside a client operation, taken from the client
// library's debug log: a piece of a parallel region read (which replica,
// when, how long), a replica that failed, a region looked up again, an
// append attempt (its push and Append RPC). It
// shows where a slow operation spent its time.
type Event struct {
	What    string  `json:"what"`              // the log message, less its "chunkfs " prefix
	StartMS float64 `json:"start_ms"`          // from the point's first client start (in a Result: Unix ms)
	MS      float64 `json:"ms,omitempty"`      // how long it took
	Replica string  `json:"replica,omitempty"` // the replica asked first
	Handle  uint64  `json:"handle,omitempty"`  // the chunk
	Offset  int     `json:"offset,omitempty"`  // the piece's offset in its region
	Bytes   int     `json:"bytes,omitempty"`   // the piece's size
	Other   bool    `json:"other,omitempty"`   // served by another replica than Replica
	Err     string  `json:"err,omitempty"`     // the failure, if any
	// Note marks a rescued piece: "rescue" (read again from an idle
	// replica), "rescue, kept" (and that answer won), "rescued elsewhere"
	// (the first request, cancelled).
	Note string `json:"note,omitempty"`
	// Steps are the parts of a write or append attempt (prepare, reserve,
	// push, wait, lease, write, append), in ms.
	Steps map[string]float64 `json:"steps,omitempty"`
}

// maxEvents bounds the events one worker reports.
const maxEvents = 4096

// traceHandler is a slog.Handler that keeps the client library's debug
// records about reads, writes and appends as Events (at most maxEvents) and drops the rest.
type traceHandler struct {
	mu     sync.Mutex
	events []Event
}

func (h *traceHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *traceHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *traceHandler) WithGroup(string) slog.Handler            { return h }

func (h *traceHandler) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "chunkfs read") && !strings.HasPrefix(r.Message, "chunkfs append") && !strings.HasPrefix(r.Message, "chunkfs write") {
		return nil
	}
	e := Event{What: strings.TrimPrefix(r.Message, "chunkfs "), StartMS: float64(r.Time.UnixNano()) / 1e6}
	r.Attrs(func(a slog.Attr) bool {
		v := a.Value.Resolve()
		switch a.Key {
		case "replica":
			e.Replica = v.String()
		case "handle":
			if v.Kind() == slog.KindUint64 {
				e.Handle = v.Uint64()
			} else if v.Kind() == slog.KindInt64 && v.Int64() >= 0 {
				e.Handle = uint64(v.Int64())
			}
		case "offset":
			if v.Kind() == slog.KindInt64 {
				e.Offset = int(v.Int64())
			}
		case "bytes":
			if v.Kind() == slog.KindInt64 {
				e.Bytes = int(v.Int64())
			}
		case "start_ns":
			if v.Kind() == slog.KindInt64 {
				e.StartMS = float64(v.Int64()) / 1e6
			}
		case "took":
			if v.Kind() == slog.KindDuration {
				e.MS = float64(v.Duration()) / float64(time.Millisecond)
			}
		case "reserve", "push", "append", "prepare", "wait", "lease", "write":
			if v.Kind() == slog.KindDuration {
				if e.Steps == nil {
					e.Steps = make(map[string]float64, 5)
				}
				e.Steps[a.Key] = float64(v.Duration()) / float64(time.Millisecond)
			}
		case "own":
			if v.Kind() == slog.KindBool {
				e.Other = !v.Bool()
			}
		case "err":
			e.Err = v.String()
		case "note":
			e.Note = v.String()
		}
		return true
	})
	h.mu.Lock()
	if len(h.events) < maxEvents {
		h.events = append(h.events, e)
	}
	h.mu.Unlock()
	return nil
}

// take returns the events so far and forgets them.
func (h *traceHandler) take() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := h.events
	h.events = nil
	return ev
}
