package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/chunkserver"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/cluster"
	"github.com/chunkfs/chunkfs/internal/fusefs"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/metrics"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/web"
)

// httpFlags are the flags of a process's status server: --http and
// --pprof.
type httpFlags struct {
	addr  string
	pprof bool
}

// add defines the flags on fs, --http defaulting to def.
func (h *httpFlags) add(fs *flag.FlagSet) { h.addDefault(fs, "") }

func (h *httpFlags) addDefault(fs *flag.FlagSet, def string) {
	fs.StringVar(&h.addr, "http", def, "`HOST:PORT` to serve the status page and /metrics on (empty: none)")
	fs.BoolVar(&h.pprof, "pprof", false, "also serve /debug/pprof on the --http address")
}

// serveHTTP serves h on addr until ctx ends, and tells w where.
func serveHTTP(ctx context.Context, w io.Writer, what, addr string, h http.Handler) (string, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--http %s: %v", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(w, "%s: %v\n", what, err)
		}
	}()
	url := "http://" + lis.Addr().String() + "/"
	fmt.Fprintf(w, "%s on %s\n", what, url)
	return url, nil
}

// masterStatus is a master's status server, made before the master so
// that the master's OnCall can count into it.
type masterStatus struct {
	flags  httpFlags
	reg    *metrics.Registry
	calls  *web.Calls
	recent *web.Recent
}

// recentKept is how many warnings and errors a status page lists.
const recentKept = 30

// newMasterStatus returns the status server of flags, or nil when --http
// is not given; it sets cfg's OnCall.
func newMasterStatus(flags httpFlags, cfg *master.Config) *masterStatus {
	if flags.addr == "" {
		return nil
	}
	s := &masterStatus{flags: flags, reg: metrics.New(), recent: web.NewRecent(recentKept)}
	s.calls = web.NewCalls(s.reg)
	s.configure(cfg)
	return s
}

// configure has a master count its calls into s and keep its warnings
// for the page.
func (s *masterStatus) configure(cfg *master.Config) {
	cfg.OnCall = s.calls.ObserveCall
	if cfg.Logger != nil {
		cfg.Logger = slog.New(s.recent.Handler(cfg.Logger.Handler()))
	}
}

// serve serves the page of the master reached at addr. figures and
// problems come from the serving process's master (nil while it has none);
// traffic, when set, sums the chunkservers' bytes.
// sec secures the page's own client of the master.
func (s *masterStatus) serve(ctx context.Context, w io.Writer, log *slog.Logger, addr string, sec *rpc.Security, m func() *master.Master, traffic func() (int64, int64)) (string, error) {
	cc := client.DefaultConfig()
	cc.Master, cc.Security = addr, sec
	c, err := client.New(ctx, cc)
	if err != nil {
		return "", err
	}
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	cfg := web.DefaultMasterConfig()
	cfg.Source, cfg.Calls, cfg.Metrics, cfg.Pprof, cfg.Logger, cfg.Traffic = c, s.calls, s.reg, s.flags.pprof, log, traffic
	cfg.Recent = s.recent
	cfg.Figures = func() master.Figures {
		if mm := m(); mm != nil {
			return mm.Figures()
		}
		return master.Figures{Role: "none"}
	}
	cfg.Problems = func(limit int) []master.ChunkProblem {
		if mm := m(); mm != nil {
			return mm.Problems(limit)
		}
		return nil
	}
	page, err := web.NewMaster(cfg)
	if err != nil {
		return "", err
	}
	go page.Run(ctx)
	return serveHTTP(ctx, w, "master status page", s.flags.addr, page)
}

// serveChunkserverStatus serves a chunkserver's page and metrics (reg,
// which its OnCall already counts into).
func serveChunkserverStatus(ctx context.Context, w io.Writer, flags httpFlags, reg *metrics.Registry, recent *web.Recent, log *slog.Logger, s *chunkserver.Server) error {
	page, err := web.NewChunkserver(web.ChunkserverConfig{Figures: s.Figures, Metrics: reg, Pprof: flags.pprof, Recent: recent, Clock: clock.Real{}, Logger: log})
	if err != nil {
		return err
	}
	go page.Run(ctx)
	_, err = serveHTTP(ctx, w, "chunkserver status page", flags.addr, page)
	return err
}

// serveDevStatus serves the status page of an in-process cluster: its
// figures come from the cluster's leading master, and Table 3's read and
// write rates from its chunkservers' data streams.
func serveDevStatus(ctx context.Context, e *env, s *masterStatus, c *cluster.Cluster) (string, error) {
	traffic := func() (read, written int64) {
		for _, f := range c.ChunkserverFigures() {
			read, written = read+f.BytesRead, written+f.BytesWritten
		}
		return read, written
	}
	return s.serve(ctx, e.stdout, slog.New(slog.NewTextHandler(io.Discard, nil)), c.MasterAddr(), c.Security(), c.Master, traffic)
}

// mountMetrics serves a mount's /metrics when --http is given and returns
// b with its calls timed into them and cfg with its FUSE operations timed
// too; else b and cfg as they are.
func mountMetrics(ctx context.Context, flags httpFlags, b fusefs.Backend, cfg fusefs.Config) (fusefs.Backend, fusefs.Config) {
	if flags.addr == "" {
		return b, cfg
	}
	reg := metrics.New()
	if _, err := serveHTTP(ctx, os.Stderr, "mount metrics (/metrics)", flags.addr, web.MetricsOnly(reg, flags.pprof)); err != nil {
		fmt.Fprintf(os.Stderr, "chunkfs: %v\n", err)
		return b, cfg
	}
	cfg.Ops = reg.ObserveFuseOp
	return fusefs.Observed(b, reg.ObserveMountCall), cfg
}
