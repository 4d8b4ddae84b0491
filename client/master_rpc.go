package client

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// masterConn is the client's end of the master's service: the caller its
// requests act as and the master (or group) they go to. The *_rpc.go
// files make the calls; the rest of the client sees its own types only.
type masterConn struct {
	caller *pb.Caller
	master masterAPI       // batches concurrent metadata calls (batch_rpc.go)
	mc     pb.MasterClient // the master (or group) itself, for calls never batched
}

// dialMaster connects c to the masters at addrs, through an rpc.MasterSet
// that retries a call no master received within the call's deadline: a
// lone master that restarts is waited for as a group's leader is (the set
// is returned for a group only). batch is how many metadata calls share
// a request. first is what New's first call goes to: a lone master
// directly, so that a client dialing a master that is down is told at once.
func (c *Client) dialMaster(addrs string, caller chunkfs.Caller, batch int) (first pb.MasterClient, set *rpc.MasterSet, err error) {
	c.caller = &pb.Caller{Uid: caller.UID, Gids: caller.GIDs}
	list := masterAddrs(addrs)
	set, err = rpc.NewMasterSet(c.pool, list)
	if err != nil {
		return nil, nil, err
	}
	m := pb.NewMasterClient(set)
	c.master, c.mc = newBatcher(m, batch), m
	if len(list) > 1 {
		return m, set, nil
	}
	first, err = c.pool.Master(list[0])
	return first, nil, err
}

// clusterInfoCall asks master m for the cluster's chunk size.
func (c *Client) clusterInfoCall(ctx context.Context, m pb.MasterClient) (chunkSize int64, err error) {
	info, err := m.ClusterInfo(ctx, &pb.ClusterInfoRequest{})
	if err != nil {
		return 0, err
	}
	c.observe(info.StateId)
	return info.ChunkSize, nil
}
