package master

import (
	"context"

	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// maxFsckFiles bounds the files one Fsck call checks.
const maxFsckFiles = 100000

// Fsck checks the replication of every chunk of the files under a path
// (like hdfs fsck): per file, its chunks that are healthy, under-replicated
// (fewer live current replicas than its replication) and missing (none,
// for a chunk holding committed bytes; one past its file's length with no
// replica has nothing to lose and counts as healthy), of which those
// whose only known copies are held back (they may lack acknowledged
// writes),
// and the corrupt replicas reported and not yet replaced; with totals. The
// caller needs the permissions a listing and a read of each file need;
// what it may not see is skipped.
func (m service) Fsck(ctx context.Context, req *pb.FsckRequest) (*pb.FsckResponse, error) {
	c, err := m.pathArg(ctx, "Fsck", "fsck", req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	limit := int64(req.MaxFiles)
	if limit <= 0 || limit > maxFsckFiles {
		limit = maxFsckFiles
	}
	rep, err := m.fsck(c, req.Path, limit)
	if err != nil {
		return nil, err
	}
	return fsckTo(rep), nil
}

// fsckTo is an fsck report on the wire.
func fsckTo(r fsckReport) *pb.FsckResponse {
	resp := &pb.FsckResponse{StateId: r.stateID, FilesChecked: r.filesChecked, Chunks: r.total.chunks,
		Healthy: r.total.healthy, UnderReplicated: r.total.underReplicated, Missing: r.total.missing, MissingHeldBack: r.total.heldBack,
		Corrupt: r.total.corrupt, Truncated: r.truncated, SafeMode: r.safeMode, Files: make([]*pb.FsckFile, len(r.files))}
	for i, f := range r.files {
		resp.Files[i] = &pb.FsckFile{Path: f.path, Replication: int32(f.replication), Length: f.length, Chunks: f.chunks,
			Healthy: f.healthy, UnderReplicated: f.underReplicated, Missing: f.missing, MissingHeldBack: f.heldBack, Corrupt: f.corrupt}
	}
	return resp
}
