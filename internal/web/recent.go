package web

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Recent keeps the last warnings and errors a process logged, for its
// status page. Its Handler wraps the process's slog handler: records at
// slog.LevelWarn and above are copied here as well as logged. A nil
// *Recent keeps nothing.
type Recent struct {
	mu      sync.Mutex // guards entries and next
	entries []LogEntry // a ring of at most max entries
	next    int
	max     int
}

// LogEntry is one kept record.
type LogEntry struct {
	Time    time.Time
	Level   string
	Message string // the message and its attributes, as key=value
}

// NewRecent returns a Recent that keeps the last n records.
func NewRecent(n int) *Recent { return &Recent{max: n} }

// Handler returns h with records at Warn and above also kept in r.
func (r *Recent) Handler(h slog.Handler) slog.Handler { return &recentHandler{h: h, r: r} }

func (r *Recent) add(e LogEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.entries) < r.max {
		r.entries = append(r.entries, e)
		return
	}
	r.entries[r.next] = e
	r.next = (r.next + 1) % r.max
}

// Entries returns the kept records, newest first.
func (r *Recent) Entries() []LogEntry {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]LogEntry, 0, len(r.entries))
	for i := range r.entries {
		out = append(out, r.entries[(r.next+len(r.entries)-1-i)%len(r.entries)])
	}
	return out
}

type recentHandler struct {
	h     slog.Handler
	r     *Recent
	attrs []slog.Attr
}

func (h *recentHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.h.Enabled(ctx, l)
}

func (h *recentHandler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		var b strings.Builder
		b.WriteString(rec.Message)
		for _, a := range h.attrs {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		}
		rec.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		h.r.add(LogEntry{Time: rec.Time, Level: rec.Level.String(), Message: b.String()})
	}
	if !h.h.Enabled(ctx, rec.Level) {
		return nil
	}
	return h.h.Handle(ctx, rec)
}

func (h *recentHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recentHandler{h: h.h.WithAttrs(as), r: h.r, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], as...)}
}

func (h *recentHandler) WithGroup(name string) slog.Handler {
	return &recentHandler{h: h.h.WithGroup(name), r: h.r, attrs: h.attrs}
}
