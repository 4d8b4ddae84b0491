package client

import (
	"testing"

	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/rpc/wiretest"
)

// TestReportReadsEveryField: a cluster report with every field of the
// message set arrives with every field of Report set (a field added to
// the message and forgotten here fails), its values carried across.
func TestReportReadsEveryField(t *testing.T) {
	wire := wiretest.Fill(&pb.ClusterReportResponse{})
	r := reportFrom(wire)
	if zero := wiretest.Zero(r); len(zero) > 0 {
		t.Errorf("fields not read: %v", zero)
	}
	s := r.Servers[0]
	if r.DeadBytes != wire.DeadBytes || s.LastHeartbeat.Milliseconds() != wire.Servers[0].LastHeartbeatMs || s.Disks[0].ID != wire.Servers[0].Disks[0].Id || r.Balance.Rate != wire.Balance.Rate {
		t.Errorf("values not carried: %+v from %v", r, wire)
	}
}
