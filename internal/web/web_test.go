package web

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/metrics"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/status"
)

// fakeSource is a cluster of two chunkservers and a few files.
type fakeSource struct {
	files map[string]*chunkfs.FileInfo
	group map[string]*client.HAStatus // by address; nil: a master alone
}

func newFakeSource() *fakeSource {
	f := &fakeSource{files: map[string]*chunkfs.FileInfo{}}
	f.add("/", fs.ModeDir|0o755, 0)
	f.add("/data", fs.ModeDir|0o755, 0)
	f.add("/data/a<b>.txt", 0o644, 70<<20)
	f.add("/empty", 0o644, 0)
	return f
}

func (f *fakeSource) add(p string, mode fs.FileMode, n int64) {
	f.files[p] = &chunkfs.FileInfo{FileName: path.Base(p), FileMode: mode, Length: n, Replication: 3, Chunks: (n + 64<<20 - 1) / (64 << 20)}
}

func (f *fakeSource) ClusterReport(context.Context) (*client.Report, error) {
	return &client.Report{Files: 2, Directories: 2, Chunks: 2, Bytes: 70 << 20, UnderReplicated: 1, ChunkSize: 64 << 20,
		Servers: []client.ServerStatus{
			{ID: "cs1", Addr: "127.0.0.1:7001", Rack: "r1", Capacity: 100 << 30, Used: 140 << 20, Free: 60 << 30, Chunks: 2, Alive: true, LastHeartbeat: time.Second},
			{ID: "cs2", Addr: "127.0.0.1:7002", Rack: "r2", Capacity: 100 << 30, Used: 70 << 20, Free: 60 << 30, Chunks: 1, Alive: false, LastHeartbeat: time.Minute},
		}}, nil
}

func (f *fakeSource) HAStatus(ctx context.Context) (*client.HAStatus, error) {
	if f.group != nil {
		return f.group["a1"], nil
	}
	return &client.HAStatus{ID: "m1", Addr: "127.0.0.1:7070", Role: "standalone", Applied: 42, Members: []client.HAMember{{ID: "m1", Voter: true}}}, nil
}

func (f *fakeSource) HAStatusOf(ctx context.Context, addr string) (*client.HAStatus, error) {
	if f.group != nil {
		if st := f.group[addr]; st != nil {
			return st, nil
		}
		return nil, chunkfs.E("ha status", addr, chunkfs.KindUnavailable, "connection refused")
	}
	return f.HAStatus(ctx)
}

func (f *fakeSource) Stat(_ context.Context, p string) (*chunkfs.FileInfo, error) {
	if fi := f.files[p]; fi != nil {
		return fi, nil
	}
	return nil, chunkfs.E("stat", p, chunkfs.KindNotExist, "")
}

func (f *fakeSource) ReadDir(_ context.Context, p string) ([]fs.DirEntry, error) {
	var out []fs.DirEntry
	for q, fi := range f.files {
		if q != "/" && path.Dir(q) == p {
			out = append(out, fs.FileInfoToDirEntry(fi))
		}
	}
	return out, nil
}

func (f *fakeSource) Chunks(_ context.Context, p string) ([]client.ChunkInfo, error) {
	fi := f.files[p]
	var out []client.ChunkInfo
	for i := int64(0); i < fi.Chunks; i++ {
		out = append(out, client.ChunkInfo{Index: i, Handle: uint64(0xabc0 + i), Version: 3, Replicas: []string{"127.0.0.1:7001", "127.0.0.1:7002"}})
	}
	return out, nil
}

type testServer struct {
	*Master
	reg   *metrics.Registry
	clock *clock.Fake
}

func newTestMaster(t *testing.T) *testServer {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	reg := metrics.New()
	var read, written int64
	cfg := DefaultMasterConfig()
	cfg.Source, cfg.Clock, cfg.Metrics, cfg.Calls, cfg.Recent = newFakeSource(), clk, reg, NewCalls(reg), NewRecent(5)
	slog.New(cfg.Recent.Handler(slog.NewTextHandler(io.Discard, nil))).Warn("chunkserver dead", "addr", "127.0.0.1:7002")
	cfg.Figures = func() master.Figures {
		return master.Figures{Files: 2, Dirs: 2, Chunks: 2, UnderReplicated: 1, LiveServers: 1, DeadServers: 1, Role: "standalone", Applied: 42, Leases: 1, MetadataBytes: 1234}
	}
	cfg.Problems = func(limit int) []master.ChunkProblem {
		return []master.ChunkProblem{{Handle: 0xabc1, Version: 3, Live: 1, Want: 3, Source: "127.0.0.1:7001", Target: "127.0.0.1:7003"}}
	}
	cfg.Traffic = func() (int64, int64) { read += 60 << 20; written += 6 << 20; return read, written }
	m, err := NewMaster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{Master: m, reg: reg, clock: clk}
}

func get(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func wantIn(t *testing.T, page string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(page, w) {
			t.Errorf("page lacks %q", w)
		}
	}
}

func TestMasterOverview(t *testing.T) {
	s := newTestMaster(t)
	for i := 0; i < 12; i++ { // two minutes of samples
		s.clock.Advance(status.Step)
		s.Sample()
	}
	code, page := get(t, s, "/")
	if code != 200 {
		t.Fatalf("GET /: %d\n%s", code, page)
	}
	wantIn(t, page, `id="table2"`, "Metadata at master</th><td>1.2 KiB", "Chunkservers</th><td>1 (1 dead)",
		"Number of files</th><td>2", `id="table3"`, "Read rate", "Master ops", "<svg", "<polyline",
		"127.0.0.1:7002", "dead", "000000000000abc1", "127.0.0.1:7001 → 127.0.0.1:7003", "standalone", "1 of 3",
		`id="recent"`, "chunkserver dead addr=127.0.0.1:7002")
	if strings.Contains(page, "<script") {
		t.Error("the page has a script")
	}
}

func TestMasterTablesJSONAgreesWithPage(t *testing.T) {
	s := newTestMaster(t)
	code, body := get(t, s, "/api/tables")
	if code != 200 {
		t.Fatalf("GET /api/tables: %d %s", code, body)
	}
	wantIn(t, body, `"files":2`, `"master_metadata_bytes":1234`, `"chunkservers":1`, `"last_minute"`, `"traffic_known":true`)
}

func TestMasterMetrics(t *testing.T) {
	s := newTestMaster(t)
	s.cfg.Calls.ObserveCall("/chunkfs.v1.Master/Create", "OK", time.Millisecond)
	s.cfg.Calls.ObserveCall("/chunkfs.v1.Master/Heartbeat", "OK", time.Millisecond)
	if n := s.cfg.Calls.Ops(); n != 1 {
		t.Errorf("ops %d: heartbeats count as master operations", n)
	}
	code, body := get(t, s, "/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	if _, err := metrics.Check(strings.NewReader(body)); err != nil {
		t.Fatalf("/metrics: %v\n%s", err, body)
	}
	wantIn(t, body, `chunkfs_raft_state{state="standalone"} 1`, "chunkfs_chunks_under_replicated 1", "chunkfs_leases_held 1",
		`chunkfs_rpc_requests_total{code="OK",method="Create",service="Master"} 1`, "chunkfs_master_metadata_bytes 1234")
}

func TestBrowse(t *testing.T) {
	s := newTestMaster(t)
	code, page := get(t, s, "/browse?path=/data")
	if code != 200 {
		t.Fatalf("browse /data: %d %s", code, page)
	}
	wantIn(t, page, "a&lt;b&gt;.txt", "/browse?path=%2fdata%2fa%3cb%3e.txt")
	code, page = get(t, s, "/browse?path="+url.QueryEscape("/data/a<b>.txt"))
	if code != 200 {
		t.Fatalf("browse file: %d %s", code, page)
	}
	wantIn(t, page, `id="chunks"`, "000000000000abc1", "127.0.0.1:7001, 127.0.0.1:7002", "70.0 MiB")
	if code, page = get(t, s, "/browse?path=/empty"); code != 200 || !strings.Contains(page, "the file is empty") {
		t.Errorf("empty file: %d", code)
	}
	if code, _ = get(t, s, "/browse"); code != 200 {
		t.Errorf("browse with no path: %d", code)
	}
}

func TestBadRequests(t *testing.T) {
	s := newTestMaster(t)
	for target, want := range map[string]int{
		"/browse?path=/nope":                                    404,
		"/browse?path=relative":                                 400,
		"/browse?path=/a%00b":                                   400,
		"/browse?path=/a&path=/b":                               400,
		"/browse?path=/" + strings.Repeat("x", 5000):            414,
		"/browse?path=%zz":                                      200, // an unparsable query is no path: the root
		"/no/such/page":                                         404,
		"/debug/pprof/":                                         404, // not enabled
		"/api/tables?x=" + strings.Repeat("%ff", 3000):          200,
		"/assets/nothing.css":                                   404,
		"/browse?path=/data/../data/./a%3cb%3e.txt&junk=%01%02": 200,
	} {
		code, body := get(t, s, target)
		if code != want {
			t.Errorf("GET %.80s: %d, want %d (%s)", target, code, want, strings.TrimSpace(body))
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d", rec.Code)
	}
}

func TestPprofOnlyWhenEnabled(t *testing.T) {
	cfg := DefaultMasterConfig()
	cfg.Source, cfg.Pprof = newFakeSource(), true
	cfg.Figures = func() master.Figures { return master.Figures{} }
	cfg.Problems = func(int) []master.ChunkProblem { return nil }
	m, err := NewMaster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, m, "/debug/pprof/"); code != 200 {
		t.Errorf("pprof enabled: %d", code)
	}
	if code, page := get(t, m, "/"); code != 200 || !strings.Contains(page, "Every chunk has its replicas") || !strings.Contains(page, "not reported") {
		t.Errorf("overview without traffic: %d", code)
	}
	if code, _ := get(t, m, "/metrics"); code != 404 {
		t.Errorf("/metrics with no registry: %d", code)
	}
	if _, err := NewMaster(DefaultMasterConfig()); err == nil {
		t.Error("NewMaster took a config with no source")
	}
}

func TestStylesheetEmbedded(t *testing.T) {
	s := newTestMaster(t)
	code, css := get(t, s, "/assets/style.css")
	if code != 200 || !strings.Contains(css, "@media") {
		t.Errorf("style.css: %d", code)
	}
}

func TestChunkserverPage(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	reg := metrics.New()
	f := chunkserver.Figures{ID: "cs1", Addr: "127.0.0.1:7001", Rack: "r1", Chunks: 3, Used: 5 << 20, MetadataBytes: 400,
		BufferUsed: 1 << 20, BufferLimit: 512 << 20, Disks: []chunkserver.DiskFigures{{ID: "host:1", Total: 100 << 30, Free: 50 << 30}},
		Corrupt: []chunkfs.Handle{0x77}, Scrubbed: 9, Reads: rpc.ReadTotals{Foreground: 7, Background: 3, Urgent: 2, Paced: 5}}
	c, err := NewChunkserver(ChunkserverConfig{Figures: func() chunkserver.Figures {
		f.BytesRead += 10 << 20
		return f
	}, Metrics: reg, Clock: clk, Logger: DefaultMasterConfig().Logger})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 7; i++ {
		clk.Advance(status.Step)
		c.sample(c.cfg.Figures())
	}
	code, page := get(t, c, "/")
	if code != 200 {
		t.Fatalf("GET /: %d %s", code, page)
	}
	wantIn(t, page, "host:1", "1.0 MiB of 512.0 MiB", "0000000000000077", "9 chunks verified", "1.0 MiB/s", "<polyline")
	code, body := get(t, c, "/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	if _, err := metrics.Check(strings.NewReader(body)); err != nil {
		t.Fatalf("/metrics: %v\n%s", err, body)
	}
	wantIn(t, body, `chunkfs_stream_bytes_total{direction="read"}`, `chunkfs_stream_reads_total{kind="urgent"} 2`, "chunkfs_stream_reads_paced_total 5", `chunkfs_disk_free_bytes{disk="host:1"}`, "chunkfs_push_buffer_bytes 1.048576e+06")
	if code, _ := get(t, c, "/browse"); code != 404 {
		t.Errorf("chunkserver /browse: %d", code)
	}
}

// TestGrafanaDashboardNamesExist checks that every chunkfs metric the
// dashboard in docs/ queries is one the processes export.
func TestGrafanaDashboardNamesExist(t *testing.T) {
	dash, err := os.ReadFile("../../docs/grafana-chunkfs.json")
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(dash, &v); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	s := newTestMaster(t)
	s.cfg.Calls.ObserveCall("/chunkfs.v1.Master/Create", "OK", time.Millisecond)
	s.reg.ObserveMountCall("read", time.Millisecond)
	_, exported := get(t, s, "/metrics")
	c, err := NewChunkserver(ChunkserverConfig{Figures: func() chunkserver.Figures {
		return chunkserver.Figures{Disks: []chunkserver.DiskFigures{{ID: "d"}}}
	}, Metrics: metrics.New(), Clock: s.clock, Logger: DefaultMasterConfig().Logger})
	if err != nil {
		t.Fatal(err)
	}
	_, cs := get(t, c, "/metrics")
	exported += cs
	for _, name := range regexp.MustCompile(`chunkfs_[a-z_]+`).FindAllString(string(dash), -1) {
		base := strings.TrimSuffix(name, "_bucket")
		if !strings.Contains(exported, "# TYPE "+base+" ") {
			t.Errorf("the dashboard queries %s, which no process exports", name)
		}
	}
}

func TestMastersOfAGroup(t *testing.T) {
	s := newTestMaster(t)
	members := []client.HAMember{{ID: "m1", Addr: "a1", Voter: true}, {ID: "m2", Addr: "a2", Voter: true}, {ID: "o1", Addr: "a3"}}
	s.cfg.Source.(*fakeSource).group = map[string]*client.HAStatus{
		"a1": {ID: "m1", Role: "leader", Applied: 100, Members: members},
		"a2": {ID: "m2", Role: "follower", Applied: 97, Members: members},
	}
	code, page := get(t, s, "/")
	if code != 200 {
		t.Fatalf("GET /: %d", code)
	}
	i := strings.Index(page, `id="masters"`)
	masters := page[i : i+strings.Index(page[i:], "</table>")]
	wantIn(t, masters, "<td>leader</td><td>100</td><td>0</td>", "<td>follower</td><td>97</td><td>3</td>", "o1 (observer)", "connection refused")
}
