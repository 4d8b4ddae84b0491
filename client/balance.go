package client

import "context"

// BalanceStatus is the state of the master's rebalancer, which moves
// replicas towards even utilisation at lower priority than repair.
type BalanceStatus struct {
	Running bool `json:"running"`
	// Threshold is the target: every live server within this many
	// percentage points of the mean utilisation.
	Threshold     float64 `json:"threshold"`
	MovesInFlight int64   `json:"moves_in_flight"`
	Moved         int64   `json:"moved"`       // replicas moved since the master started
	BytesMoved    int64   `json:"bytes_moved"` // their bytes
	// Spread is the highest minus the lowest utilisation of the live
	// servers not being decommissioned, in percentage points.
	Spread float64 `json:"spread"`
	Rate   float64 `json:"rate"` // bytes per second moved over the last minute
}

// Balance reads (action "status" or ""), starts ("start", with a
// threshold in percentage points, 0 keeping the current one) or stops
// ("stop") the rebalancer, and returns its state. It needs the superuser.
func (c *Client) Balance(ctx context.Context, action string, threshold float64) (*BalanceStatus, error) {
	st, err := c.balanceCall(ctx, action, threshold)
	if err != nil {
		return nil, wrapOp("balance "+action, "", err)
	}
	return st, nil
}

// DecommissionState is how far the draining of one chunkserver is.
type DecommissionState struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
	// State is decommissioning, decommissioned (every chunk it holds has
	// its replication elsewhere: safe to remove), or live after a
	// recommission.
	State     string `json:"state"`
	Chunks    int64  `json:"chunks"`    // replicas it holds
	Remaining int64  `json:"remaining"` // chunks not yet fully replicated elsewhere
}

// Decommission drains chunkserver server (its ID or address): it gets no
// new replica, and each chunk it holds is cloned elsewhere, while reads
// are still served from it. With recommission it undoes that. An empty
// server changes nothing. It returns the state of every server being
// decommissioned (and of the recommissioned one). The intent is logged,
// so it survives a restart or failover of the master. It needs the
// superuser.
func (c *Client) Decommission(ctx context.Context, server string, recommission bool) ([]DecommissionState, error) {
	out, err := c.decommissionCall(ctx, server, recommission)
	if err != nil {
		op := "decommission"
		if recommission {
			op = "recommission"
		}
		return nil, wrapOp(op, server, err)
	}
	return out, nil
}
