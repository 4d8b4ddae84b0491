package master

import (
	"context"
	"path"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// maxFsckFiles bounds the files one Fsck call checks.
const maxFsckFiles = 100000

// Fsck checks the replication of every chunk of the files under a path
// (like hdfs fsck): per file, its chunks that are healthy, under-replicated
// (fewer live current replicas than its replication) and missing (none,
// for a chunk holding committed bytes; one past its file's length with no
// replica has nothing to lose and counts as healthy),
// and the corrupt replicas reported and not yet replaced; with totals. The
// caller needs the permissions a listing and a read of each file need;
// what it may not see is skipped.
func (m service) Fsck(ctx context.Context, req *pb.FsckRequest) (*pb.FsckResponse, error) {
	const op = "fsck"
	c, err := m.pathArg(ctx, "Fsck", op, req.Path, req.Caller)
	if err != nil {
		return nil, err
	}
	limit := int64(req.MaxFiles)
	if limit <= 0 || limit > maxFsckFiles {
		limit = maxFsckFiles
	}
	resp := &pb.FsckResponse{}
	resp.SafeMode, _ = m.startupSafeMode() // locations still being learnt: missing counts may fall (an operator's hold changes no count)
	resp.StateId = m.state.read(func(ns *namespace.Namespace) {
		m.regMu.Lock()
		defer m.regMu.Unlock()
		var fi chunkfs.FileInfo
		if fi, err = ns.Stat(c, req.Path); err != nil {
			return
		}
		f := fsckWalk{m: m.Master, ns: ns, c: c, resp: resp, limit: limit, links: map[uint64]bool{}}
		err = f.visit(req.Path, fi)
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// fsckWalk is one Fsck's walk of the tree; it runs under the namespace's
// read lock and Master.regMu.
type fsckWalk struct {
	m     *Master
	ns    *namespace.Namespace
	c     chunkfs.Caller
	resp  *pb.FsckResponse
	limit int64
	links map[uint64]bool // files with several names, checked at the first
}

func (f *fsckWalk) visit(p string, fi chunkfs.FileInfo) error {
	switch {
	case f.resp.FilesChecked >= f.limit:
		f.resp.Truncated = true
		return nil
	case fi.IsDir():
		return f.dir(p)
	case fi.Mode().IsRegular() && fi.Nlink > 1 && f.links[fi.Inode]:
		return nil // a hard link of a file checked under another name
	case fi.Mode().IsRegular():
		if fi.Nlink > 1 {
			f.links[fi.Inode] = true
		}
		return f.file(p, fi)
	}
	return nil
}

func (f *fsckWalk) dir(p string) error {
	after := ""
	for {
		kids, more, err := f.ns.List(f.c, p, after, 0)
		if err != nil {
			if p == "/" || chunkfs.KindOf(err) != chunkfs.KindPermission {
				return err
			}
			return nil // a directory the caller may not read is skipped
		}
		for _, k := range kids {
			if err := f.visit(path.Join(p, k.FileName), k); err != nil {
				return err
			}
		}
		if !more || len(kids) == 0 || f.resp.Truncated {
			return nil
		}
		after = kids[len(kids)-1].FileName
	}
}

func (f *fsckWalk) file(p string, fi chunkfs.FileInfo) error {
	out := &pb.FsckFile{Path: p, Replication: int32(fi.Replication), Length: fi.Length}
	for first := int64(0); first < max(fi.Chunks, 1); first += namespace.MaxChunkCount {
		_, chunks, err := f.ns.Chunks(f.c, p, first, namespace.MaxChunkCount, false)
		if err != nil {
			if chunkfs.KindOf(err) == chunkfs.KindPermission {
				return nil
			}
			return err
		}
		for _, ch := range chunks {
			h := f.m.reg.health(ch.Handle, ch.Version)
			out.Chunks++
			switch {
			case h.live == 0 && ch.Index*f.ns.ChunkSize() >= fi.Length:
				out.Healthy++ // holds no committed byte: nothing to lose
			case h.live == 0:
				out.Missing++
			case h.live < fi.Replication:
				out.UnderReplicated++
			default:
				out.Healthy++
			}
			out.Corrupt += int64(h.corrupt)
		}
	}
	r := f.resp
	r.FilesChecked++
	r.Chunks += out.Chunks
	r.Healthy += out.Healthy
	r.UnderReplicated += out.UnderReplicated
	r.Missing += out.Missing
	r.Corrupt += out.Corrupt
	r.Files = append(r.Files, out)
	return nil
}
