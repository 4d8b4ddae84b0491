package client

import "context"

// SafeModeStatus is the master's safe mode: while on, it creates no chunk
// (writers needing a new chunk wait, retrying) and re-replicates nothing.
type SafeModeStatus struct {
	On     bool   `json:"on"`
	Reason string `json:"reason,omitempty"` // what it waits for
	// Held: an operator put the master in safe mode (SafeMode "enter");
	// only "leave" ends it, through restarts and failovers.
	Held bool `json:"held"`
}

// SafeMode reads the master's safe mode (action "get" or ""), holds the
// master in it ("enter") or ends it ("leave"), as hdfs dfsadmin -safemode,
// and returns the state after the action. Enter and leave need the
// superuser; leave also ends the safe mode a master starts in, when a
// chunk lost for good keeps too few chunks located for it to end by
// itself.
func (c *Client) SafeMode(ctx context.Context, action string) (*SafeModeStatus, error) {
	st, err := c.safeModeCall(ctx, action)
	if err != nil {
		return nil, wrapOp("safemode "+action, "", err)
	}
	return st, nil
}
