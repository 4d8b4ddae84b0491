package metrics

import (
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

func scrape(t *testing.T, r *Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func TestMetricsParseWithHelpAndType(t *testing.T) {
	r := New()
	r.ObserveCall("/chunkfs.v1.Master/Create", "OK", 3*time.Millisecond)
	r.ObserveCall("/chunkfs.v1.Master/Create", "NotFound", time.Millisecond)
	r.ObserveMountCall("read", time.Millisecond)
	r.ObserveFuseOp("lookup", 0, 50*time.Microsecond)
	r.ObserveFuseOp("lookup", syscall.ENOENT, 20*time.Microsecond)
	r.ObserveFuseOp("write", syscall.EIO, time.Second)
	r.ObserveFuseOp("ioctl", syscall.Errno(4000), time.Millisecond) // no name
	r.Figures(func() []Figure {
		return []Figure{
			{Name: "chunkfs_chunks", Help: "Chunks.", Value: 3},
			{Name: "chunkfs_raft_state", Help: "Raft state.", Labels: []Label{{"state", "leader"}}, Value: 1},
			{Name: "chunkfs_raft_state", Help: "Raft state.", Labels: []Label{{"state", "follower"}}, Value: 0},
			{Name: "chunkfs_stream_bytes_total", Help: "Bytes.", Kind: Counter, Labels: []Label{{"direction", "written"}}, Value: 200},
			{Name: "chunkfs_clones_total", Help: "Clones.", Kind: Counter, Value: 7},
		}
	})
	text := scrape(t, r)
	n, err := Check(strings.NewReader(text))
	if err != nil {
		t.Fatalf("check: %v\n%s", err, text)
	}
	for _, want := range []string{
		`chunkfs_rpc_requests_total{code="OK",method="Create",service="Master"} 1`,
		`chunkfs_rpc_duration_seconds_count{method="Create",service="Master"} 2`,
		`chunkfs_stream_bytes_total{direction="written"} 200`,
		`chunkfs_raft_state{state="leader"} 1`,
		"# TYPE chunkfs_clones_total counter",
		`chunkfs_fuse_operation_duration_seconds_count{op="lookup"} 2`,
		`chunkfs_fuse_operation_duration_seconds_bucket{op="write",le="+Inf"} 1`,
		`chunkfs_fuse_operation_errors_total{errno="ENOENT",op="lookup"} 1`,
		`chunkfs_fuse_operation_errors_total{errno="EIO",op="write"} 1`,
		`chunkfs_fuse_operation_errors_total{errno="4000",op="ioctl"} 1`,
		"# TYPE chunkfs_fuse_operation_duration_seconds histogram",
		"go_goroutines",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in /metrics", want)
		}
	}
	if n < 10 {
		t.Errorf("%d families, want the runtime's too", n)
	}
}

func TestRegistriesAreIndependent(t *testing.T) {
	a, b := New(), New()
	a.ObserveCall("/chunkfs.v1.Master/Stat", "OK", 0)
	if strings.Contains(scrape(t, b), `method="Stat"`) {
		t.Error("a count in one registry shows in another")
	}
	var nilReg *Registry
	nilReg.ObserveCall("/x/y", "OK", 0) // no panic
}

func TestCheckRejects(t *testing.T) {
	for name, text := range map[string]string{
		"no help":   "# TYPE x gauge\nx 1\n",
		"no type":   "# HELP x An x.\nx 1\n",
		"duplicate": "# HELP x An x.\n# TYPE x gauge\nx{a=\"1\"} 1\nx{a=\"1\"} 2\n",
		"garbage":   "# HELP x An x.\n# TYPE x gauge\nx one\n",
	} {
		if _, err := Check(strings.NewReader(text)); err == nil {
			t.Errorf("%s: Check accepted\n%s", name, text)
		}
	}
}

func TestSplitMethod(t *testing.T) {
	for in, want := range map[string][2]string{
		"/chunkfs.v1.Master/Create":     {"Master", "Create"},
		"/chunkfs.v1.ChunkServer/Write": {"ChunkServer", "Write"},
		"odd":                           {"unknown", "odd"},
	} {
		if s, m := splitMethod(in); s != want[0] || m != want[1] {
			t.Errorf("splitMethod(%q) = %q, %q", in, s, m)
		}
	}
}
