package web

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestRecentKeepsWarningsNewestFirst(t *testing.T) {
	var out bytes.Buffer
	r := NewRecent(2)
	log := slog.New(r.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError}))).With("role", "cs")
	log.Info("ignored")
	log.Warn("first", "n", 1)
	log.Warn("second")
	log.Error("third", "err", "disk")
	got := r.Entries()
	if len(got) != 2 || got[0].Message != "third role=cs err=disk" || got[1].Message != "second role=cs" || got[0].Level != "ERROR" {
		t.Errorf("entries: %+v", got)
	}
	if s := out.String(); strings.Contains(s, "first") || !strings.Contains(s, "third") {
		t.Errorf("the wrapped handler's level is not kept: %q", s)
	}
	if (*Recent)(nil).Entries() != nil {
		t.Error("a nil Recent has entries")
	}
}
