// Package reqid carries a request ID: a short token the client library
// makes for each user-level operation (a write, an append, a read, a
// namespace call) and that travels with every call the operation makes, to
// the master, along a chain of chunkservers and from a primary to its
// secondaries, so that one operation's log lines can be found in every
// process it touched.
//
// The ID lives in a context.Context (With, From); internal/rpc carries it
// across the wire (gRPC metadata and the data stream's request frames).
// Handler adds it to every log record made with such a context, as the
// attribute "req", so code logs with slog's *Context methods and never
// formats the ID itself.
//
// An ID is 1 to MaxLen bytes of [0-9A-Za-z._-]; a malformed one is never
// put in a context (Valid).
package reqid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
)

// MaxLen bounds an ID, on the wire and in a context.
const MaxLen = 32

// Key is the name of the ID in logs ("req=…") and, prefixed, in gRPC
// metadata.
const Key = "req"

type ctxKey struct{}

// New returns a fresh random ID of 16 hex digits.
func New() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Valid reports whether id is a well-formed ID.
func Valid(id string) bool {
	if len(id) == 0 || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// With returns ctx carrying id; a malformed id leaves ctx as it is.
func With(ctx context.Context, id string) context.Context {
	if !Valid(id) {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, id)
}

// From returns the ID ctx carries, or "".
func From(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// Ensure returns ctx if it carries an ID, else ctx with a new one: an
// operation started inside another (a mount's kernel call, a command) keeps
// the outer ID.
func Ensure(ctx context.Context) context.Context {
	if From(ctx) != "" {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, New())
}

// Handler returns h adding the "req" attribute to every record logged with
// a context that carries an ID. Wrapping a Handler again returns it as it
// is.
func Handler(h slog.Handler) slog.Handler {
	if _, ok := h.(*handler); ok {
		return h
	}
	return &handler{h: h}
}

// Logger returns l logging through Handler (nil: slog.Default()).
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	if _, ok := l.Handler().(*handler); ok {
		return l
	}
	return slog.New(Handler(l.Handler()))
}

type handler struct{ h slog.Handler }

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if id := From(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String(Key, id))
	}
	return h.h.Handle(ctx, r)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler { return &handler{h: h.h.WithAttrs(as)} }

func (h *handler) WithGroup(name string) slog.Handler { return &handler{h: h.h.WithGroup(name)} }
