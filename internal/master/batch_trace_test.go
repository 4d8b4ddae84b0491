package master

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/reqid"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// syncLog is a log sink safe for concurrent use.
type syncLog struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBatchLogsEachOpsRequestID sends one batch of ops of three
// operations: each op with a well-formed ID is logged with it (and its
// error), one with a malformed ID is served and logged with none.
func TestBatchLogsEachOpsRequestID(t *testing.T) {
	var log syncLog
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(t, t.TempDir(), clk)
	cfg.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tm := startWith(t, cfg, clk)
	tm.create(root, "/f")
	ops := []*pb.MetaOp{
		{Op: &pb.MetaOp_Stat{Stat: &pb.StatRequest{Caller: root, Path: "/f"}}, ReqId: "op-1"},
		{Op: &pb.MetaOp_Mkdir{Mkdir: &pb.MkdirRequest{Caller: root, Path: "/d", Mode: 0o755}}, ReqId: "op-2"},
		{Op: &pb.MetaOp_Stat{Stat: &pb.StatRequest{Caller: root, Path: "/nope"}}, ReqId: "bad id"},
		{Op: &pb.MetaOp_Stat{Stat: &pb.StatRequest{Caller: root, Path: "/f"}}, ReqId: strings.Repeat("x", reqid.MaxLen+1)},
		{Op: &pb.MetaOp_Mkdir{Mkdir: &pb.MkdirRequest{Caller: root, Path: "/d", Mode: 0o755}}, ReqId: "op-5"},
	}
	resp, err := tm.c.Batch(bg, &pb.BatchRequest{Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 5 || resp.Results[0].GetStat() == nil || resp.Results[1].GetMkdir() == nil || resp.Results[2].GetError() == nil || resp.Results[3].GetStat() == nil || resp.Results[4].GetError() == nil {
		t.Fatalf("results %v", resp.Results)
	}
	out := log.String()
	for _, want := range []string{`msg="batch op" op=stat ops=5 req=op-1`, `msg="batch op" op=mkdir ops=5 req=op-2`, `msg="batch op" op=mkdir ops=5 err="mkdir /d: file exists" req=op-5`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, `msg="batch op"`); n != 3 {
		t.Errorf("%d batch op lines, want 3 (malformed IDs are ignored):\n%s", n, out)
	}
}
