package metadata

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/master"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/status"
	"github.com/chunkfs/chunkfs/internal/web"
)

// benchMaster is a master in this process, served on loopback at an
// address that stays the same across restarts (the fleet reports there).
type benchMaster struct {
	cfg   master.Config
	addr  string
	m     *master.Master
	serve chan error // Serve's result
}

// masterConfig is the master of `bench metadata`: the defaults, on dir,
// with the log's fsync unless noSync, leases of lease, heartbeats every heartbeat (dead
// after ten missed, as the defaults: 3 s and 30 s).
func masterConfig(dir string, noSync bool, heartbeat, lease time.Duration, log *slog.Logger) master.Config {
	mc := master.DefaultConfig()
	mc.Dir, mc.NoSync, mc.Logger, mc.LeaseDuration = dir, noSync, log, lease
	mc.HeartbeatInterval, mc.DeadAfter = heartbeat, 10*heartbeat
	return mc
}

// startMaster opens the master on cfg.Dir and serves it at addr
// ("127.0.0.1:0": a free port, kept for restarts).
func startMaster(cfg master.Config, addr string) (*benchMaster, error) {
	m, err := master.Open(cfg)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("listen for the master: %v", err)
	}
	bm := &benchMaster{cfg: cfg, addr: lis.Addr().String(), m: m, serve: make(chan error, 1)}
	go func() { bm.serve <- m.Serve(lis) }()
	return bm, nil
}

// close stops the master and waits for Serve to return.
func (bm *benchMaster) close() error {
	if bm.m == nil {
		return nil
	}
	err := bm.m.Close()
	<-bm.serve
	bm.m = nil
	return err
}

// restart closes the master and opens it again on the same directory and
// address; it returns how long Open took (restoring the checkpoint and
// replaying the log after it).
func (bm *benchMaster) restart() (time.Duration, error) {
	if err := bm.close(); err != nil {
		return 0, err
	}
	start := time.Now()
	m, err := master.Open(bm.cfg)
	if err != nil {
		return 0, err
	}
	open := time.Since(start)
	lis, err := listenAgain(bm.addr)
	if err != nil {
		m.Close()
		return 0, fmt.Errorf("listen for the master again: %v", err)
	}
	bm.m = m
	go func() { bm.serve <- m.Serve(lis) }()
	return open, nil
}

// report is the master's cluster report, taken in-process.
func (bm *benchMaster) report(ctx context.Context) (*pb.ClusterReportResponse, error) {
	return bm.m.Server().ClusterReport(ctx, &pb.ClusterReportRequest{})
}

// table2 is Table 2 as `chunkfs admin report` and the status page compute
// it: the client's report over RPC and the master's own heap figure.
func (bm *benchMaster) table2(ctx context.Context) (status.Table2, error) {
	c, err := client.Dial(ctx, bm.addr)
	if err != nil {
		return status.Table2{}, err
	}
	defer c.Close()
	r, err := c.ClusterReport(ctx)
	if err != nil {
		return status.Table2{}, err
	}
	return status.NewTable2(web.ClusterOf(r, bm.m.Figures().MetadataBytes)), nil
}

// listenAgain listens on addr, a port just closed, trying for a few
// seconds: a client redialling the closed port from the ephemeral range
// may hold it for a moment (a connection to itself).
func listenAgain(addr string) (net.Listener, error) {
	var err error
	for range 50 {
		var lis net.Listener
		if lis, err = net.Listen("tcp", addr); err == nil {
			return lis, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, err
}
