package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/status"
	"github.com/chunkfs/chunkfs/internal/web"
)

func TestAdminReportTables(t *testing.T) {
	out := ok(t, "", "admin", "report")
	for _, want := range []string{"Table 2 (as in the GFS paper)", "Number of dead files      0", "Metadata at master        not known here", "give --http"} {
		if !strings.Contains(out, want) {
			t.Errorf("admin report lacks %q:\n%s", want, out)
		}
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/tables" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(web.Tables{
			Table2: status.Table2{Chunkservers: 3, Files: 7, MasterMetadata: 1234},
			Table3: status.Table3{Traffic: true, Minute: status.Rate{ReadBytes: 2 << 20, Over: time.Minute}, Start: status.Rate{Ops: 4, Over: time.Hour}},
		})
	}))
	defer page.Close()
	out = ok(t, "", "admin", "report", "--http", page.URL)
	for _, want := range []string{"Metadata at master        1.2 KiB", "Number of files           7", "Read rate   2.0 MiB/s", "Master ops  0.0 Ops/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("admin report --http lacks %q:\n%s", want, out)
		}
	}
	if r := runCLI(t, "", "admin", "report", "--http", page.URL+"/nothing/"); r.code == 0 || !strings.Contains(r.stderr, "404") {
		t.Errorf("admin report --http to no status page: exit %d, %s", r.code, r.stderr)
	}
}
