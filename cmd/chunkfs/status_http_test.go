package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/cluster"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/metrics"
	"github.com/chunkfs/chunkfs/internal/web"
)

// statusCluster starts a cluster with the master's status page, as
// `chunkfs dev` serves it, and returns the page's URL.
func statusCluster(t *testing.T, ctx context.Context) (*cluster.Cluster, string) {
	t.Helper()
	status := newMasterStatus(httpFlags{addr: "127.0.0.1:0"}, &master.Config{})
	cfg := cluster.DefaultConfig()
	cfg.Dir, cfg.ChunkSize = t.TempDir(), 1<<20
	// No chunkserver dies here: a loaded machine's pauses must not make
	// the master declare one dead (its replicas, and the counts checked,
	// would move).
	cfg.DeadAfter = 30 * time.Second
	cfg.Master = status.configure
	cl, err := cluster.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	var banner bytes.Buffer
	url, err := serveDevStatus(ctx, &env{stdout: &banner}, status, cl)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(banner.String(), "master status page on "+url) {
		t.Errorf("banner %q does not give the page's address", banner.String())
	}
	return cl, url
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestStatusOfACluster serves the status page and /metrics of a real
// in-process cluster and checks what they say after files are written
// and read.
func TestStatusOfACluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, url := statusCluster(t, ctx)
	writeFiles(t, ctx, cl.MasterAddr())
	var read, written, meta int64
	for _, f := range cl.ChunkserverFigures() {
		read, written, meta = read+f.BytesRead, written+f.BytesWritten, meta+f.MetadataBytes
	}
	if written < 3*(3<<20) || read < 3<<20 || meta == 0 {
		t.Errorf("chunkservers moved %d bytes in, %d out, hold %d bytes of metadata; want 3 replicas of 3 MiB in, 3 MiB out", written, read, meta)
	}
	// 3 MiB on 1 MiB chunks, one chunk of 1000 bytes, and the empty
	// file's chunk 0, which its create placed: five chunks of three
	// replicas.
	code, body := httpGet(t, url+"metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	if _, err := metrics.Check(strings.NewReader(body)); err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	for _, want := range []string{`chunkfs_rpc_requests_total{code="OK",method="PrepareWrite",service="Master"}`, "chunkfs_files 3", "chunkfs_chunks 5", `chunkfs_raft_state{state="standalone"} 1`, "chunkfs_replicas 15"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q\n%s", want, grepLines(body, "chunkfs_rpc_requests_total"))
		}
	}
	code, page := httpGet(t, url)
	if code != 200 || !strings.Contains(page, "Number of files</th><td>3") || !strings.Contains(page, cl.ChunkserverAddr(2)) || !strings.Contains(page, "Recent warnings and errors") {
		t.Errorf("status page: %d\n%.2000s", code, page)
	}
	if code, _ := httpGet(t, url+"browse?path=/web/nothing"); code != 404 {
		t.Errorf("browsing a missing file: %d, want 404", code)
	}
	cs, err := web.NewChunkserver(web.ChunkserverConfig{Figures: func() chunkserver.Figures { return cl.ChunkserverFigures()[0] },
		Metrics: metrics.New(), Clock: clock.Real{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(cs)
	defer srv.Close()
	if code, page := httpGet(t, srv.URL); code != 200 || !strings.Contains(page, cl.ChunkserverAddr(0)) || !strings.Contains(page, "Push buffers in use") {
		t.Errorf("chunkserver page: %d\n%.1000s", code, page)
	}
	code, body = httpGet(t, srv.URL+"/metrics")
	if _, err := metrics.Check(strings.NewReader(body)); code != 200 || err != nil || !strings.Contains(body, "chunkfs_chunkserver_chunks 5") {
		t.Errorf("chunkserver /metrics: %d, %v\n%s", code, err, grepLines(body, "chunkfs_chunkserver"))
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDevServesStatusPage runs `chunkfs dev` and reads the status page
// and /metrics at the address it prints.
func TestDevServesStatusPage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "dev", "--dir", t.TempDir(), "--listen", freeAddr(t), "--chunk-size", "65536")
	var out, errs syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	deadline := time.Now().Add(90 * time.Second) // the whole suite may be running beside it on two cores
	for !strings.Contains(out.String(), "Ctrl-C stops the cluster") {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("chunkfs dev exited (%v) before it started; output:\n%s\nstderr:\n%s", err, out.String(), errs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("chunkfs dev did not start; output:\n%s\nstderr:\n%s", out.String(), errs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	m := regexp.MustCompile(`master status page on (http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("chunkfs dev prints no status page address:\n%s", out.String())
	}
	if code, page := httpGet(t, m[1]); code != 200 || !strings.Contains(page, "GFS Table 2") {
		t.Errorf("status page: %d\n%.500s", code, page)
	}
	code, body := httpGet(t, m[1]+"metrics")
	if _, err := metrics.Check(strings.NewReader(body)); code != 200 || err != nil {
		t.Errorf("/metrics: %d, %v", code, err)
	}
	cmd.Process.Signal(os.Interrupt)
	err := <-exited
	exited <- err
	if err != nil {
		t.Fatalf("chunkfs dev after Ctrl-C: %v\n%s", err, out.String())
	}
}
