// Package web serves chunkfs's status pages over HTTP: the master's page
// (the GFS paper's Tables 2 and 3 of the running cluster, its
// chunkservers, replication health and repair queue, the masters of a
// group, a small file browser and plots of the last hour), a
// chunkserver's page, /metrics on every process and, when enabled,
// /debug/pprof. Pages are rendered on the server with html/template from
// templates and a stylesheet embedded in the binary: no build step, and
// no JavaScript is needed to read them.
//
// The handlers read the cluster through the same client calls and the
// same table code (internal/status) as `chunkfs admin report`; what only
// the serving process knows (its heap, Raft state, leases, the data its
// chunkservers moved) comes in through functions in the configuration.
package web

import (
	"embed"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/chunkfs/chunkfs/internal/metrics"
	"github.com/chunkfs/chunkfs/internal/status"
)

//go:embed assets
var assets embed.FS

// templates holds every page; each page template is named after its file.
var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"bytes":   status.Bytes,
	"percent": percent,
	"ago":     ago,
	"join":    strings.Join,
	"rate":    byteRate,
}).ParseFS(assets, "assets/*.html"))

// common serves what every process's HTTP server has: the stylesheet,
// /metrics and, when pprofOn, /debug/pprof.
func common(mux *http.ServeMux, reg *metrics.Registry, pprofOn bool) {
	mux.Handle("GET /assets/", http.FileServerFS(assets))
	if reg != nil {
		mux.Handle("GET /metrics", reg.Handler())
	}
	if pprofOn {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
}

// MetricsOnly serves /metrics of reg and, when pprofOn, /debug/pprof: a
// mount's HTTP server, which has no page.
func MetricsOnly(reg *metrics.Registry, pprofOn bool) http.Handler {
	mux := http.NewServeMux()
	common(mux, reg, pprofOn)
	return mux
}

// render executes page into w, or answers 500 when it fails (the page is
// rendered into memory first, so a failure sends no half page).
func render(w http.ResponseWriter, log *slog.Logger, page string, data any) {
	var b strings.Builder
	if err := templates.ExecuteTemplate(&b, page, data); err != nil {
		log.Error("render status page", "page", page, "err", err)
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, b.String())
}

// problem answers a request the server cannot serve with code and a
// one-line reason, as text.
func problem(w http.ResponseWriter, code int, format string, args ...any) {
	http.Error(w, fmt.Sprintf(format, args...), code)
}

func percent(n, total int64) string {
	if total <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
}

func ago(d time.Duration) string {
	return d.Round(100*time.Millisecond).String() + " ago"
}
