package master

import (
	"context"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
)

// balance reads (action "" or status), starts (with threshold, 0 keeping
// the current one) or stops the rebalancer, and returns its state.
func (m *Master) balance(action string, threshold float64) (balanceStatus, error) {
	m.regMu.Lock()
	defer m.regMu.Unlock()
	switch action {
	case "", "status":
	case "start":
		m.reg.setBalance(true, threshold)
	case "stop":
		m.reg.setBalance(false, 0)
	default:
		return balanceStatus{}, chunkfs.E("balance", action, chunkfs.KindInvalid, "unknown action; want status, start or stop")
	}
	return m.reg.balanceStatus(m.cfg.Placement, m.cfg.Clock.Now()), nil
}

// drainState is how far the draining of one chunkserver is.
type drainState struct {
	id, addr, state   string // state: as drainProgress's
	chunks, remaining int64  // replicas it holds; of those, not yet replicated elsewhere
}

// decommission logs (op decommission or recommission) the draining of
// server, or its end, when one is named, and returns the state ID and the
// state of every server being drained (and of the recommissioned one).
func (m *Master) decommission(ctx context.Context, op, server string, recommission bool) (uint64, []drainState, error) {
	var id string
	if server != "" {
		var err error
		if id, err = m.drainTarget(op, server, recommission); err != nil {
			return 0, nil, err
		}
		cmd := &namespace.Command{Op: namespace.OpDecommission, Path: id}
		if recommission {
			cmd.Op = namespace.OpRecommission
		}
		if _, _, err := m.apply(ctx, cmd); err != nil {
			return 0, nil, err
		}
		m.cfg.Logger.Info("chunkserver "+op+"ed", "id", id)
	}
	var states []drainState
	stateID := m.state.read(func(ns *namespace.Namespace) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		m.reg.setDraining(ns.Draining())
		lookup := lookupIn(ns)
		for _, d := range ns.Draining() {
			states = append(states, m.drainStateLocked(d, lookup))
		}
		if recommission {
			states = append(states, m.drainStateLocked(id, lookup))
		}
	})
	return stateID, states, nil
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
func (m *Master) drainStateLocked(id string, lookup chunkLookup) drainState {
	s := m.reg.serverNamed(id)
	if s == nil {
		return drainState{id: id, state: stateDecommissioning}
	}
	p := m.reg.progress(s, lookup)
	return drainState{id: s.id, addr: s.addr, state: p.state, chunks: int64(p.chunks), remaining: int64(p.remaining)}
}
