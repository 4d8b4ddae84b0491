package client

import (
	"context"
)

// FsckFile is the replication health of one file's chunks.
type FsckFile struct {
	Path            string `json:"path"`
	Replication     int    `json:"replication"`
	Length          int64  `json:"length"`
	Chunks          int64  `json:"chunks"`
	Healthy         int64  `json:"healthy"`
	UnderReplicated int64  `json:"under_replicated"`
	Missing         int64  `json:"missing"`
	MissingHeldBack int64  `json:"missing_held_back"` // of Missing, those whose only known copies are held back: they may lack acknowledged writes
	Corrupt         int64  `json:"corrupt"`           // corrupt replicas not yet replaced
}

// Status is "HEALTHY", "UNDER-REPLICATED", "CORRUPT", "MISSING" or
// "MISSING (HELD BACK)" (a missing chunk's only copies are held back: they
// may lack acknowledged writes), the worst that applies.
func (f *FsckFile) Status() string {
	switch {
	case f.MissingHeldBack > 0:
		return "MISSING (HELD BACK)"
	case f.Missing > 0:
		return "MISSING"
	case f.Corrupt > 0:
		return "CORRUPT"
	case f.UnderReplicated > 0:
		return "UNDER-REPLICATED"
	}
	return "HEALTHY"
}

// FsckReport is the result of Fsck: every file checked and the totals.
type FsckReport struct {
	Files           []FsckFile `json:"files"`
	FilesChecked    int64      `json:"files_checked"`
	Chunks          int64      `json:"chunks"`
	Healthy         int64      `json:"healthy"`
	UnderReplicated int64      `json:"under_replicated"`
	Missing         int64      `json:"missing"`
	MissingHeldBack int64      `json:"missing_held_back"` // of Missing, those whose only known copies are held back
	Corrupt         int64      `json:"corrupt"`
	Truncated       bool       `json:"truncated,omitempty"` // the master checked only its maximum of files
	SafeMode        bool       `json:"safe_mode,omitempty"`
}

// Good reports whether every chunk checked has a good replica: no chunk
// is missing. (Under-replicated chunks are being healed.)
func (r *FsckReport) Good() bool { return r.Missing == 0 }

// Fsck asks the master for the replication health of the files under path.
func (c *Client) Fsck(ctx context.Context, path string) (*FsckReport, error) {
	path, err := checkPath("fsck", path)
	if err != nil {
		return nil, err
	}
	r, err := c.fsckCall(ctx, path)
	if err != nil {
		return nil, wrapOp("fsck", path, err)
	}
	return r, nil
}
