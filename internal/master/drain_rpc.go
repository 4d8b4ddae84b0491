package master

import (
	"context"
	"math"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
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
	m.regMu.Lock()
	defer m.regMu.Unlock()
	switch req.Action {
	case "", "status":
	case "start":
		m.reg.setBalance(true, req.Threshold)
	case "stop":
		m.reg.setBalance(false, 0)
	default:
		return nil, chunkfs.E("balance", req.Action, chunkfs.KindInvalid, "unknown action; want status, start or stop")
	}
	st := balanceTo(m.reg.balanceStatus(m.cfg.Placement, m.cfg.Clock.Now()))
	return &pb.BalanceResponse{StateId: m.state.stateID(), Status: st}, nil
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
	resp := &pb.DecommissionResponse{}
	var id string
	if req.Server != "" {
		var err error
		if id, err = m.drainTarget(op, req.Server, req.Recommission); err != nil {
			return nil, err
		}
		cmd := &namespace.Command{Op: namespace.OpDecommission, Path: id}
		if req.Recommission {
			cmd.Op = namespace.OpRecommission
		}
		if _, _, err := m.apply(ctx, cmd); err != nil {
			return nil, err
		}
		m.cfg.Logger.Info("chunkserver "+op+"ed", "id", id)
	}
	resp.StateId = m.state.read(func(ns *namespace.Namespace) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		m.reg.setDraining(ns.Draining())
		lookup := lookupIn(ns)
		for _, d := range ns.Draining() {
			resp.Servers = append(resp.Servers, m.drainStateLocked(d, lookup))
		}
		if req.Recommission {
			resp.Servers = append(resp.Servers, m.drainStateLocked(id, lookup))
		}
	})
	return resp, nil
}

// drainTarget resolves name (an ID or an address) to the ID of a known
// chunkserver; recommission also takes the ID of one being decommissioned
// that has not registered since the master started.
func (m *Master) drainTarget(op, name string, recommission bool) (string, error) {
	m.regMu.Lock()
	s := m.reg.serverNamed(name)
	m.regMu.Unlock()
	if s != nil {
		return s.id, nil
	}
	known := false
	if recommission {
		m.state.read(func(ns *namespace.Namespace) {
			for _, d := range ns.Draining() {
				known = known || d == name
			}
		})
	}
	if !known {
		return "", chunkfs.E(op, name, chunkfs.KindNotExist, "no such chunkserver (give its ID or address, as admin report lists them)")
	}
	return name, nil
}

// drainStateLocked describes server id for Decommission; it needs regMu.
func (m *Master) drainStateLocked(id string, lookup chunkLookup) *pb.DecommissionState {
	s := m.reg.serverNamed(id)
	if s == nil {
		return &pb.DecommissionState{Id: id, State: stateDecommissioning}
	}
	p := m.reg.progress(s, lookup)
	return &pb.DecommissionState{Id: s.id, Addr: s.addr, State: p.state, Chunks: int64(p.chunks), Remaining: int64(p.remaining)}
}
