package client

import (
	"context"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// The master's administrative calls (cluster report, fsck, trash, locks,
// balance, decommission, safe mode, HA, snapshot) on the wire: each sends
// its request, adopts the answer's state ID, and returns the client's own
// types. The errors are the master's, unwrapped; callers name the op.

func (c *Client) clusterReportCall(ctx context.Context) (*Report, error) {
	resp, err := c.master.ClusterReport(ctx, &pb.ClusterReportRequest{})
	if err != nil {
		return nil, err
	}
	c.observe(resp.StateId)
	return reportFrom(resp), nil
}

// reportFrom is a cluster report from the wire.
func reportFrom(resp *pb.ClusterReportResponse) *Report {
	r := &Report{
		Files: resp.Files, Directories: resp.Directories, Chunks: resp.Chunks,
		UnderReplicated: resp.UnderReplicated, Bytes: resp.Bytes, ChunkSize: resp.ChunkSize,
		Missing: resp.Missing, MissingHeldBack: resp.MissingHeldBack, BeingCloned: resp.BeingCloned, Corrupt: resp.Corrupt, RepairRate: resp.RepairRate,
		Repaired: resp.Repaired, SafeMode: resp.SafeMode, SafeModeReason: resp.SafeModeReason, SafeModeHeld: resp.SafeModeHeld,
		Balance: balanceFrom(resp.Balance), Servers: make([]ServerStatus, 0, len(resp.Servers)),
		DeadFiles: resp.DeadFiles, DeadDirectories: resp.DeadDirectories, DeadChunks: resp.DeadChunks, DeadBytes: resp.DeadBytes,
	}
	for _, s := range resp.Servers {
		st := ServerStatus{
			ID: s.Id, Addr: s.Addr, Rack: s.Rack, Capacity: s.Capacity, Used: s.Used, Free: s.Free, Load: s.Load,
			Chunks: s.Chunks, Alive: s.Alive, LastHeartbeat: time.Duration(s.LastHeartbeatMs) * time.Millisecond,
			Disks: make([]Disk, 0, len(s.Disks)), State: s.State, DrainRemaining: s.DrainRemaining,
		}
		for _, d := range s.Disks {
			st.Disks = append(st.Disks, Disk{ID: d.Id, Capacity: d.Capacity, Free: d.Free})
		}
		r.Servers = append(r.Servers, st)
	}
	return r
}

func (c *Client) fsckCall(ctx context.Context, path string) (*FsckReport, error) {
	resp, err := c.master.Fsck(ctx, &pb.FsckRequest{Caller: c.caller, Path: path})
	if err != nil {
		return nil, err
	}
	c.observe(resp.StateId)
	r := &FsckReport{FilesChecked: resp.FilesChecked, Chunks: resp.Chunks, Healthy: resp.Healthy,
		UnderReplicated: resp.UnderReplicated, Missing: resp.Missing, MissingHeldBack: resp.MissingHeldBack, Corrupt: resp.Corrupt,
		Truncated: resp.Truncated, SafeMode: resp.SafeMode, Files: make([]FsckFile, 0, len(resp.Files))}
	for _, f := range resp.Files {
		r.Files = append(r.Files, FsckFile{Path: f.Path, Replication: int(f.Replication), Length: f.Length, Chunks: f.Chunks,
			Healthy: f.Healthy, UnderReplicated: f.UnderReplicated, Missing: f.Missing, MissingHeldBack: f.MissingHeldBack, Corrupt: f.Corrupt})
	}
	return r, nil
}

// trashPage is one page of the trash listing: the entries after after,
// the grace period, and whether more follow.
func (c *Client) trashPage(ctx context.Context, after uint64) (entries []TrashEntry, period time.Duration, more bool, err error) {
	resp, err := c.mc.TrashList(ctx, &pb.TrashListRequest{Caller: c.caller, After: after})
	if err != nil {
		return nil, 0, false, err
	}
	c.observe(resp.StateId)
	for _, e := range resp.Entries {
		entries = append(entries, trashEntry(e))
	}
	return entries, time.Duration(resp.PeriodNs), resp.More, nil
}

func trashEntry(e *pb.TrashEntry) TrashEntry {
	return TrashEntry{ID: e.Id, Path: e.Path, Deleted: time.Unix(0, e.DeletedNs), Expires: time.Unix(0, e.ExpiresNs),
		DeletedBy: e.DeletedBy, Info: rpc.FileInfoOf(e.Info), Files: e.Files, Directories: e.Directories,
		Chunks: e.Chunks, Bytes: e.Bytes}
}

func (c *Client) undeleteCall(ctx context.Context, path string, o UndeleteOptions) (*chunkfs.FileInfo, error) {
	resp, err := c.mc.Undelete(ctx, &pb.UndeleteRequest{Caller: c.caller, Path: path, Id: o.ID, To: o.To, Parents: o.Parents})
	if err != nil {
		return nil, err
	}
	c.observe(resp.StateId)
	return rpc.FileInfoOf(resp.Info), nil
}

func (c *Client) purgeTrashCall(ctx context.Context, id uint64) error {
	resp, err := c.mc.PurgeTrash(ctx, &pb.PurgeTrashRequest{Caller: c.caller, Id: id})
	if err != nil {
		return err
	}
	c.observe(resp.StateId)
	return nil
}

func (c *Client) lockSessionCall(ctx context.Context, session uint64, reclaim, close bool) (uint64, time.Duration, bool, error) {
	resp, err := c.mc.LockSession(ctx, &pb.LockSessionRequest{Session: session, Reclaim: reclaim, Close: close})
	if err != nil {
		return 0, 0, false, err
	}
	return resp.Session, time.Duration(resp.TtlMs) * time.Millisecond, resp.Grace, nil
}

func (c *Client) lockCall(ctx context.Context, path string, inode, session uint64, l FileLock, test, reclaim bool) (bool, FileLock, error) {
	req := &pb.LockRequest{Caller: c.caller, Path: path, Inode: inode, Session: session, Test: test, Reclaim: reclaim,
		Lock: &pb.FileLock{Kind: uint32(l.Kind), Type: uint32(l.Type), Start: l.Start, End: l.End, Owner: l.Owner, Pid: l.PID}}
	resp, err := c.mc.Lock(ctx, req)
	if err != nil {
		return false, FileLock{}, err
	}
	var h FileLock
	if x := resp.Conflict; x != nil {
		h = FileLock{Kind: int(x.Kind), Type: int(x.Type), Start: x.Start, End: x.End, Owner: x.Owner, PID: x.Pid, Session: x.Session}
	}
	return resp.Granted, h, nil
}

func (c *Client) balanceCall(ctx context.Context, action string, threshold float64) (*BalanceStatus, error) {
	resp, err := c.mc.Balance(ctx, &pb.BalanceRequest{Caller: c.caller, Action: action, Threshold: threshold})
	if err != nil {
		return nil, err
	}
	c.observe(resp.StateId)
	return balanceFrom(resp.Status), nil
}

func balanceFrom(b *pb.BalanceStatus) *BalanceStatus {
	if b == nil {
		return nil
	}
	return &BalanceStatus{Running: b.Running, Threshold: b.Threshold, MovesInFlight: b.MovesInFlight, Moved: b.Moved,
		BytesMoved: b.BytesMoved, Spread: b.Spread, Rate: b.Rate}
}

func (c *Client) decommissionCall(ctx context.Context, server string, recommission bool) ([]DecommissionState, error) {
	resp, err := c.mc.Decommission(ctx, &pb.DecommissionRequest{Caller: c.caller, Server: server, Recommission: recommission})
	if err != nil {
		return nil, err
	}
	c.observe(resp.StateId)
	out := make([]DecommissionState, 0, len(resp.Servers))
	for _, s := range resp.Servers {
		out = append(out, DecommissionState{ID: s.Id, Addr: s.Addr, State: s.State, Chunks: s.Chunks, Remaining: s.Remaining})
	}
	return out, nil
}

func (c *Client) safeModeCall(ctx context.Context, action string) (*SafeModeStatus, error) {
	resp, err := c.mc.SafeMode(ctx, &pb.SafeModeRequest{Caller: c.caller, Action: action})
	if err != nil {
		return nil, err
	}
	c.observe(resp.StateId)
	return &SafeModeStatus{On: resp.SafeMode, Reason: resp.Reason, Held: resp.Held}, nil
}

func (c *Client) msyncCall(ctx context.Context) error {
	resp, err := c.mc.Msync(ctx, &pb.MsyncRequest{})
	if err != nil {
		return err
	}
	c.observe(resp.StateId)
	return nil
}

// haStatusCall asks the master at addr (the client's own master or
// group when addr is empty) how it sees its group.
func (c *Client) haStatusCall(ctx context.Context, addr string) (*HAStatus, error) {
	m := c.mc
	if addr != "" {
		var err error
		if m, err = c.pool.Master(addr); err != nil {
			return nil, err
		}
	}
	resp, err := m.HAStatus(ctx, &pb.HAStatusRequest{})
	if err != nil {
		return nil, err
	}
	st := &HAStatus{ID: resp.Id, Addr: addr, Role: resp.Role, Applied: resp.Applied, Commit: resp.Commit,
		LeaderID: resp.LeaderId, LeaderAddr: resp.LeaderAddr}
	for _, mb := range resp.Members {
		st.Members = append(st.Members, HAMember{ID: mb.Id, Addr: mb.Addr, Voter: mb.Voter})
		if mb.Id == resp.Id && st.Addr == "" {
			st.Addr = mb.Addr
		}
	}
	return st, nil
}

func (c *Client) haChangeCall(ctx context.Context, op, id, addr string) error {
	_, err := c.mc.HAChange(ctx, &pb.HAChangeRequest{Caller: c.caller, Op: op, Id: id, Addr: addr})
	return err
}

func (c *Client) snapshotCall(ctx context.Context, src, dst string) error {
	resp, err := c.mc.MakeSnapshot(ctx, &pb.SnapshotRequest{Caller: c.caller, Src: src, Dst: dst})
	if err != nil {
		return err
	}
	c.observe(resp.StateId)
	return nil
}
