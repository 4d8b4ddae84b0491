// Package metrics holds chunkfs's Prometheus instruments. Each process (a
// master, a chunkserver, a mount) makes its own Registry, never the global
// default one, so a test can run many servers in one process and scrape
// each alone. The servers do not import this package: they offer hooks
// (rpc.CallObserver, a figures method) and the command that builds a
// process wires them to a Registry.
//
// Names follow Prometheus conventions: chunkfs_<what>_total for counters,
// _seconds for latencies, _bytes for sizes. docs/operations.md says what each
// means and which to alert on.
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
)

// Registry is one process's metrics. Its methods are safe for concurrent
// use; a nil *Registry ignores every observation.
type Registry struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	fuse     *prometheus.HistogramVec
	fuseOps  *prometheus.HistogramVec
	fuseErrs *prometheus.CounterVec
}

// latencyBuckets spans 100µs to about 13s: a cached stat to a slow fsync
// chain under load.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2, 18)

// New returns a registry with the RPC and mount instruments and
// the Go runtime and process collectors.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chunkfs_rpc_requests_total",
		Help: "gRPC calls answered by this server, by service, method and gRPC code.",
	}, []string{"service", "method", "code"})
	r.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "chunkfs_rpc_duration_seconds",
		Help:    "Time this server took to answer a gRPC call, by service and method.",
		Buckets: latencyBuckets,
	}, []string{"service", "method"})
	r.fuse = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "chunkfs_mount_call_duration_seconds",
		Help:    "Time a mount's calls to the cluster took, by call: the cluster's part of the latency of the FUSE operations that need one.",
		Buckets: latencyBuckets,
	}, []string{"op"})
	r.fuseOps = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "chunkfs_fuse_operation_duration_seconds",
		Help:    "Time a mount took to answer a FUSE operation of the kernel, caches included, by operation (lookup, getattr, open, read, write, flush, fsync, ...).",
		Buckets: latencyBuckets,
	}, []string{"op"})
	r.fuseErrs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chunkfs_fuse_operation_errors_total",
		Help: "FUSE operations a mount answered with an error, by operation and errno (ENOENT, EIO, ...).",
	}, []string{"op", "errno"})
	r.reg.MustRegister(r.calls, r.duration, r.fuse, r.fuseOps, r.fuseErrs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Handler serves the registry in the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Gatherer is the registry for tests and for code that reads it back.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// ObserveCall counts one answered gRPC call; it has the signature of
// rpc.CallObserver.
func (r *Registry) ObserveCall(fullMethod, code string, elapsed time.Duration) {
	if r == nil {
		return
	}
	service, method := splitMethod(fullMethod)
	r.calls.WithLabelValues(service, method, code).Inc()
	r.duration.WithLabelValues(service, method).Observe(elapsed.Seconds())
}

// splitMethod splits "/chunkfs.v1.Master/Create" into "Master" and "Create".
func splitMethod(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	service, method, ok := strings.Cut(full, "/")
	if !ok {
		return "unknown", full
	}
	return service[strings.LastIndexByte(service, '.')+1:], method
}

// ObserveMountCall records how long a mount's call to the cluster took;
// it has the signature of fusefs.Observer.
func (r *Registry) ObserveMountCall(op string, elapsed time.Duration) {
	if r == nil {
		return
	}
	r.fuse.WithLabelValues(op).Observe(elapsed.Seconds())
}

// ObserveFuseOp records one FUSE operation a mount answered, with the
// errno it was answered with (0: success); it has the signature of
// fusefs.OpObserver.
func (r *Registry) ObserveFuseOp(op string, errno syscall.Errno, elapsed time.Duration) {
	if r == nil {
		return
	}
	r.fuseOps.WithLabelValues(op).Observe(elapsed.Seconds())
	if errno != 0 {
		r.fuseErrs.WithLabelValues(op, errnoName(errno)).Inc()
	}
}

// errnoName is errno's symbolic name ("ENOENT"), or its number when it
// has none.
func errnoName(errno syscall.Errno) string {
	if name := unix.ErrnoName(errno); name != "" {
		return name
	}
	return strconv.Itoa(int(errno))
}
