package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/web"
)

// TestStandaloneMasterTable3 runs `chunkfs master --http` and three
// chunkserver processes, writes and reads a file through them, and finds
// Table 3's read and write rates, which the master has only from the
// chunkservers' heartbeats, on its /api/tables and in `admin report
// --http`: every replica's received bytes counted, the read once. The
// servers log at debug level, and each write's request ID is in the
// master's log and in every chunkserver's.
func TestStandaloneMasterTable3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four server processes")
	}
	dir := t.TempDir()
	master, page := freeAddr(t), freeAddr(t)
	m := startProc(t, "master", "master", "--dir", filepath.Join(dir, "m"), "--listen", master,
		"--chunk-size", "65536", "--reserve", "0", "--http", page, "--log-level", "debug")
	var css []*proc
	for _, cs := range []string{"cs1", "cs2", "cs3"} {
		css = append(css, startProc(t, cs, "chunkserver", "--dir", filepath.Join(dir, cs), "--listen", freeAddr(t),
			"--master", master, "--heartbeat", "200ms", "--reserve", "0", "--log-level", "debug"))
	}
	inv := invocation{master: master}
	waitFor3(t, inv)
	data := strings.Repeat("table three\n", 20000) // 240 000 bytes over four chunks
	if r := runWith(t, invocation{master: master, stdin: strings.NewReader(data)}, "put", "-", "/t3"); r.code != 0 {
		t.Fatalf("put: exit %d: %s", r.code, r.stderr)
	}
	if r := runWith(t, inv, "cat", "/t3"); r.code != 0 || r.stdout != data {
		t.Fatalf("cat: exit %d, %d bytes: %s", r.code, len(r.stdout), r.stderr)
	}
	n := float64(len(data))
	var t3 web.Tables
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := httpGet(t, "http://"+page+"/api/tables")
		if code != 200 {
			t.Fatalf("/api/tables: %d %s", code, body)
		}
		if err := json.NewDecoder(bytes.NewReader([]byte(body))).Decode(&t3); err != nil {
			t.Fatal(err)
		}
		s := t3.Table3.Start
		read, written := s.ReadBytes*s.Over.Seconds(), s.WrittenBytes*s.Over.Seconds()
		if t3.Table3.Traffic && read >= n*0.999 && written >= 3*n*0.999 {
			if read > n*1.001 || written > 3*n*1.001 {
				t.Fatalf("since restart: %.0f bytes read, %.0f written; want %.0f and 3 × that", read, written, n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Table 3 never showed the traffic: %+v (want %.0f bytes read, %.0f written)", t3.Table3, n, 3*n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkRequestIDs(t, m, css)
	r := runWith(t, inv, "admin", "report", "--http", page)
	if r.code != 0 {
		t.Fatalf("admin report --http: exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "Table 3") || !strings.Contains(r.stdout, "Read rate") || strings.Contains(r.stdout, "not reported") {
		t.Errorf("admin report --http shows no read and write rates:\n%s", r.stdout)
	}
}

// waitFor3 waits until the master of inv reports three live chunkservers.
func waitFor3(t *testing.T, inv invocation) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := runWith(t, inv, "admin", "report")
		if r.code == 0 && strings.Contains(r.stdout, "3 alive") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not up: exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var pushID = regexp.MustCompile(`msg="data stream push".* req=([0-9a-f]+)`)

// checkRequestIDs finds, for every push a chunkserver logged (the file's
// four chunks, each pushed along a chain of the three), its request ID in
// the master's log (the write's lease) and in every chunkserver's (a
// write spans one chain).
func checkRequestIDs(t *testing.T, m *proc, css []*proc) {
	t.Helper()
	ids := map[string]bool{}
	for _, cs := range css {
		for _, match := range pushID.FindAllStringSubmatch(cs.out.String(), -1) {
			ids[match[1]] = true
		}
	}
	if len(ids) < 4 {
		t.Fatalf("%d request IDs in the chunkservers' push lines, want one per chunk written (4)", len(ids))
	}
	for id := range ids {
		if !strings.Contains(m.out.String(), "req="+id) {
			t.Errorf("request %s is in a chunkserver's log, not in the master's", id)
		}
		for _, cs := range css {
			if !strings.Contains(cs.out.String(), "req="+id) {
				t.Errorf("request %s is not in %s's log", id, cs.name)
			}
		}
	}
}
