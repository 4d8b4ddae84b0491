package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// WaitAlive waits until the master (every master of a group) reports at
// least n live chunkservers, or ctx ends.
func (c *Cluster) WaitAlive(ctx context.Context, n int) error {
	c.mu.Lock()
	addrs := c.masterAddrs()
	c.mu.Unlock()
	for _, addr := range addrs {
		if err := waitAliveAt(ctx, c.Security(), addr, n); err != nil {
			return err
		}
	}
	return nil
}

func waitAliveAt(ctx context.Context, sec *rpc.Security, addr string, n int) error {
	cc, err := sec.Dial(addr)
	if err != nil {
		return err
	}
	defer cc.Close()
	m := pb.NewMasterClient(cc)
	alive := 0
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		r, err := m.ClusterReport(rctx, &pb.ClusterReportRequest{})
		cancel()
		if err == nil {
			alive = 0
			for _, s := range r.Servers {
				if s.Alive {
					alive++
				}
			}
			if alive >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %d of %d chunkservers alive: %w", alive, n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
