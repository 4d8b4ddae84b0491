package rpc

import (
	"io/fs"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// FileInfoTo is fi on the wire. FileInfoOf is its inverse; with
// DetailOf and ErrorOf they are the conversions the master and the client
// share, one each way.
func FileInfoTo(fi chunkfs.FileInfo) *pb.FileInfo {
	p := new(pb.FileInfo)
	SetFileInfo(p, fi)
	return p
}

// SetFileInfo fills p, a zero message, from fi: FileInfoTo for a message
// allocated with others (a batch answers many at once).
func SetFileInfo(p *pb.FileInfo, fi chunkfs.FileInfo) {
	p.Inode = fi.Inode
	p.Name = fi.FileName
	p.Length = fi.Length
	p.Mode = uint32(fi.FileMode)
	p.Uid = fi.UID
	p.Gid = fi.GID
	p.MtimeNs = fi.MTime.UnixNano()
	p.AtimeNs = fi.ATime.UnixNano()
	p.CtimeNs = fi.CTime.UnixNano()
	p.Replication = uint32(fi.Replication)
	p.Target = fi.Target
	p.Chunks = fi.Chunks
	p.Nlink = fi.Nlink
	p.Rdev = fi.Rdev
}

// FileInfoOf is wire metadata as a FileInfo; none is the zero FileInfo.
func FileInfoOf(p *pb.FileInfo) *chunkfs.FileInfo {
	if p == nil {
		return &chunkfs.FileInfo{}
	}
	return &chunkfs.FileInfo{
		Inode: p.Inode, FileName: p.Name, Length: p.Length, FileMode: fs.FileMode(p.Mode),
		UID: p.Uid, GID: p.Gid,
		MTime: time.Unix(0, p.MtimeNs), ATime: time.Unix(0, p.AtimeNs), CTime: time.Unix(0, p.CtimeNs),
		Replication: int(p.Replication), Target: p.Target, Chunks: p.Chunks, Nlink: p.Nlink, Rdev: p.Rdev,
	}
}
