package master

import (
	"context"
	"math"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// superuser refuses a caller other than the superuser.
func superuser(op, path string, c *pb.Caller) error {
	if c == nil || c.Uid != 0 {
		return chunkfs.E(op, path, chunkfs.KindPermission, "needs the superuser")
	}
	return nil
}

// Balance reads, starts or stops the rebalancer. Whether it runs is this
// leader's state, not logged: a new leader starts it as its configuration
// says (docs/architecture.md).
func (m service) Balance(ctx context.Context, req *pb.BalanceRequest) (*pb.BalanceResponse, error) {
	op := "balance " + req.Action
	if err := superuser(op, "", req.Caller); err != nil {
		return nil, err
	}
	if t := req.Threshold; t < 0 || t >= 100 || math.IsNaN(t) || (t != 0 && req.Action != "start") {
		return nil, chunkfs.E(op, "", chunkfs.KindInvalid, "the threshold is given with start, in (0, 100) percentage points")
	}
	st, err := m.balance(req.Action, req.Threshold)
	if err != nil {
		return nil, err
	}
	return &pb.BalanceResponse{StateId: m.state.stateID(), Status: balanceTo(st)}, nil
}

func balanceTo(b balanceStatus) *pb.BalanceStatus {
	return &pb.BalanceStatus{Running: b.running, Threshold: b.threshold, MovesInFlight: int64(b.inFlight),
		Moved: b.moved, BytesMoved: b.bytes, Spread: b.spread, Rate: b.rate}
}

// Decommission drains a chunkserver (named by ID or address), or stops
// draining it (recommission), through the log, so that every master and
// every restart keeps the intent; with no server it only reports. It
// answers the state of every server being decommissioned, and of a
// recommissioned one.
func (m service) Decommission(ctx context.Context, req *pb.DecommissionRequest) (*pb.DecommissionResponse, error) {
	op := "decommission"
	if req.Recommission {
		op = "recommission"
	}
	if err := superuser(op, req.Server, req.Caller); err != nil {
		return nil, err
	}
	if len(req.Server) > maxAddrLen || (req.Recommission && req.Server == "") {
		return nil, chunkfs.E(op, "", chunkfs.KindInvalid, "name one chunkserver, by ID or address")
	}
	id, states, err := m.decommission(ctx, op, req.Server, req.Recommission)
	if err != nil {
		return nil, err
	}
	resp := &pb.DecommissionResponse{StateId: id, Servers: make([]*pb.DecommissionState, len(states))}
	for i, d := range states {
		resp.Servers[i] = &pb.DecommissionState{Id: d.id, Addr: d.addr, State: d.state, Chunks: d.chunks, Remaining: d.remaining}
	}
	return resp, nil
}
