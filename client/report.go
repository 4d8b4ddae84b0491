package client

import (
	"context"
	"time"
)

// Report is a summary of the cluster, as the GFS paper's tables give it.
type Report struct {
	Servers         []ServerStatus `json:"servers"`
	Files           int64          `json:"files"`
	Directories     int64          `json:"directories"`
	Chunks          int64          `json:"chunks"`
	UnderReplicated int64          `json:"under_replicated"`
	Bytes           int64          `json:"bytes"`
	ChunkSize       int64          `json:"chunk_size"`
	// What the trash holds: deleted, not yet reclaimed (GFS Table 2's
	// dead files). Files, Directories, Chunks and Bytes count live ones.
	DeadFiles       int64 `json:"dead_files"`
	DeadDirectories int64 `json:"dead_directories"`
	DeadChunks      int64 `json:"dead_chunks"`
	DeadBytes       int64 `json:"dead_bytes"`
	// Replication health and repair.
	Missing int64 `json:"missing"` // chunks with no live current replica
	// MissingHeldBack counts the missing chunks whose only known copies
	// are held back: they left the replicas counted under a lease and may
	// lack acknowledged writes, so they are not served.
	MissingHeldBack int64   `json:"missing_held_back"`
	BeingCloned     int64   `json:"being_cloned"` // chunks with a clone in flight
	Corrupt         int64   `json:"corrupt"`      // corrupt replicas not yet replaced
	RepairRate      float64 `json:"repair_rate"`  // bytes per second cloned over the last minute
	Repaired        int64   `json:"repaired"`     // clones completed since the master started
	// SafeMode is set while the master, after a start, waits for
	// chunkservers to report the chunks' locations; it creates no chunk
	// meanwhile. SafeModeReason says what it waits for. SafeModeHeld: an
	// operator holds it there (SafeMode "enter").
	SafeMode       bool   `json:"safe_mode"`
	SafeModeReason string `json:"safe_mode_reason,omitempty"`
	SafeModeHeld   bool   `json:"safe_mode_held,omitempty"`
	// Balance is the rebalancer's state (nil from a master without one).
	Balance *BalanceStatus `json:"balance,omitempty"`
}

// ServerStatus describes one chunkserver as the master sees it.
type ServerStatus struct {
	ID            string        `json:"id"`
	Addr          string        `json:"addr"`
	Rack          string        `json:"rack"`
	Capacity      int64         `json:"capacity"` // bytes of its distinct disks
	Used          int64         `json:"used"`     // bytes of chunk data it holds
	Free          int64         `json:"free"`     // bytes free on its distinct disks
	Disks         []Disk        `json:"disks"`
	Load          int32         `json:"load"`
	Chunks        int64         `json:"chunks"`
	Alive         bool          `json:"alive"`
	LastHeartbeat time.Duration `json:"last_heartbeat_ns"`
	// State is live, dead, decommissioning or decommissioned (safe to
	// remove); DrainRemaining, while decommissioning, the chunks it holds
	// that do not yet have their replication elsewhere.
	State          string `json:"state"`
	DrainRemaining int64  `json:"drain_remaining"`
}

// Disk is a file system holding a chunkserver's data. Servers that share
// a file system report the same ID.
type Disk struct {
	ID       string `json:"id"`
	Capacity int64  `json:"capacity"`
	Free     int64  `json:"free"`
}

// Space sums the live servers' space as hdfs dfsadmin -report does:
// capacity and free space of their distinct disks, each disk counted once
// however many servers or directories share it, and the bytes of chunk
// data they hold.
func (r *Report) Space() (capacity, used, free int64) {
	seen := make(map[string]bool)
	for _, s := range r.Servers {
		if !s.Alive {
			continue
		}
		used += s.Used
		disks := s.Disks
		if len(disks) == 0 {
			disks = []Disk{{ID: "server:" + s.ID, Capacity: s.Capacity, Free: s.Free}}
		}
		for _, d := range disks {
			if !seen[d.ID] {
				seen[d.ID] = true
				capacity += d.Capacity
				free += d.Free
			}
		}
	}
	return capacity, used, free
}

// ClusterReport asks the master for a summary of the cluster.
func (c *Client) ClusterReport(ctx context.Context) (*Report, error) {
	r, err := c.clusterReportCall(ctx)
	if err != nil {
		return nil, wrapOp("report", "", err)
	}
	return r, nil
}

// ChunkInfo is where one chunk of a file lives.
type ChunkInfo struct {
	Index    int64    `json:"index"`
	Handle   uint64   `json:"handle"`
	Version  uint64   `json:"version"`
	Replicas []string `json:"replicas"`
	Primary  string   `json:"primary,omitempty"`
}

// Chunks lists the chunks of file path in order; holes are absent.
func (c *Client) Chunks(ctx context.Context, path string) ([]ChunkInfo, error) {
	path, err := checkPath("chunks", path)
	if err != nil {
		return nil, err
	}
	var out []ChunkInfo
	for first := int64(0); ; {
		page, err := c.getChunksCall(ctx, path, first, 0)
		if err != nil {
			return nil, wrapOp("chunks", path, err)
		}
		for _, cl := range page.chunks {
			out = append(out, ChunkInfo{Index: cl.index, Handle: uint64(cl.handle), Version: uint64(cl.version), Replicas: cl.replicas, Primary: cl.primary})
		}
		total := page.file.Chunks
		if cs := page.chunkSize; cs > 0 {
			total = max(total, (page.file.Length+cs-1)/cs)
		}
		if len(page.chunks) == 0 {
			return out, nil
		}
		first = page.chunks[len(page.chunks)-1].index + 1
		if first >= total {
			return out, nil
		}
	}
}
