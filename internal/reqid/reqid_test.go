package reqid

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for id, want := range map[string]bool{
		New(): true, "a": true, "A-b_c.9": true, strings.Repeat("x", MaxLen): true,
		"": false, strings.Repeat("x", MaxLen+1): false, "a b": false, "a\nb": false, "é": false, "a=b": false,
	} {
		if Valid(id) != want {
			t.Errorf("Valid(%q) = %v", id, !want)
		}
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if From(ctx) != "" || From(With(ctx, "bad id")) != "" {
		t.Error("an ID from nowhere")
	}
	outer := With(ctx, "outer")
	if From(Ensure(outer)) != "outer" {
		t.Error("Ensure replaced the caller's ID")
	}
	a, b := From(Ensure(ctx)), From(Ensure(ctx))
	if !Valid(a) || a == b {
		t.Errorf("Ensure made %q and %q", a, b)
	}
}

func TestHandlerAddsTheID(t *testing.T) {
	var buf bytes.Buffer
	l := Logger(slog.New(slog.NewTextHandler(&buf, nil))).With("server", "s1")
	if Logger(l).Handler() != l.Handler() {
		t.Error("a second Logger wraps again")
	}
	l.InfoContext(With(context.Background(), "r1"), "with")
	l.Info("without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "server=s1 req=r1") || strings.Contains(lines[1], "req=") {
		t.Errorf("log:\n%s", buf.String())
	}
}
