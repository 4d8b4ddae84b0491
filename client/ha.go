package client

import (
	"context"

	"github.com/chunkfs/chunkfs"
)

// HAStatus is how one master sees its group of masters.
type HAStatus struct {
	ID         string     `json:"id"`
	Addr       string     `json:"addr"`
	Role       string     `json:"role"` // leader, follower, observer, or standalone
	Applied    uint64     `json:"applied"`
	Commit     uint64     `json:"commit"`
	LeaderID   string     `json:"leader_id"`
	LeaderAddr string     `json:"leader_addr"`
	Members    []HAMember `json:"members"`
}

// HAMember is one master of a group.
type HAMember struct {
	ID    string `json:"id"`
	Addr  string `json:"addr"`
	Voter bool   `json:"voter"`
}

// StateID returns the highest master state ID the client has seen: its
// reads, from any master, see at least that state.
func (c *Client) StateID() chunkfs.StateID { return chunkfs.StateID(c.minState()) }

// readState returns the state ID a read asks for: the highest seen, after
// an msync when AutoMsync says one is due. An msync that fails leaves the
// read at the state already seen.
func (c *Client) readState(ctx context.Context) uint64 {
	if period := c.cfg.AutoMsync; period > 0 && c.observers.Load() {
		now := c.clock.Now().UnixNano()
		last := c.lastSync.Load()
		if now-last >= int64(period) && c.lastSync.CompareAndSwap(last, now) {
			if err := c.Msync(ctx); err != nil {
				c.log.DebugContext(ctx, "auto msync failed; reading at the state already seen", "err", err)
			}
		}
	}
	return c.minState()
}

// Msync asks the leader for its applied state ID and adopts it, so that reads
// made afterwards, from observers too, see every write committed before
// the call, other clients' included.
func (c *Client) Msync(ctx context.Context) error {
	if err := c.msyncCall(ctx); err != nil {
		return wrapOp("msync", "", err)
	}
	return nil
}

// HAStatus asks the client's master (the leader of a group) how it sees
// the group.
func (c *Client) HAStatus(ctx context.Context) (*HAStatus, error) {
	st, err := c.haStatusCall(ctx, "")
	if err != nil {
		return nil, wrapOp("ha status", "", err)
	}
	return st, nil
}

// HAStatusOf asks the master at addr how it sees its group.
func (c *Client) HAStatusOf(ctx context.Context, addr string) (*HAStatus, error) {
	st, err := c.haStatusCall(ctx, addr)
	if err != nil {
		return nil, wrapOp("ha status", addr, err)
	}
	return st, nil
}

// HAChange changes a group of masters: op is add-voter or add-observer
// (node id at addr), remove (node id), or transfer-leader (to voter id, or
// any when id is empty). It needs the superuser.
func (c *Client) HAChange(ctx context.Context, op, id, addr string) error {
	if err := c.haChangeCall(ctx, op, id, addr); err != nil {
		return wrapOp("ha "+op, id, err)
	}
	return nil
}
