package rpc

import (
	"io/fs"
	"reflect"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/rpc/wiretest"
)

// TestFileInfoRoundTrip: a FileInfo with every field set fills every
// field of the wire message and comes back equal.
func TestFileInfoRoundTrip(t *testing.T) {
	at := func(s int64) time.Time { return time.Unix(s, 123456789) }
	fi := chunkfs.FileInfo{Inode: 7, FileName: "f", Length: 1 << 40, FileMode: fs.ModeSymlink | 0o4755, UID: 1000, GID: 100,
		MTime: at(1), ATime: at(2), CTime: at(3), Replication: 3, Target: "/t", Chunks: 16385, Nlink: 2, Rdev: 259}
	wire := FileInfoTo(fi)
	if unset := wiretest.Unset(wire.ProtoReflect()); len(unset) > 0 {
		t.Errorf("fields not filled: %v", unset)
	}
	got := FileInfoOf(wire)
	for _, tm := range []*time.Time{&got.MTime, &got.ATime, &got.CTime} {
		*tm = tm.In(time.Local)
	}
	want := fi
	for _, tm := range []*time.Time{&want.MTime, &want.ATime, &want.CTime} {
		*tm = tm.In(time.Local)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("came back as %+v, want %+v", *got, want)
	}
	if zero := wiretest.Zero(FileInfoOf(wiretest.Fill(&pb.FileInfo{}))); len(zero) > 0 {
		t.Errorf("fields not read from the wire: %v", zero)
	}
	if *FileInfoOf(nil) != (chunkfs.FileInfo{}) {
		t.Error("no message is not the zero FileInfo")
	}
	var batch [1]pb.FileInfo
	SetFileInfo(&batch[0], fi)
	if got := FileInfoOf(&batch[0]); got.Inode != fi.Inode || !got.MTime.Equal(fi.MTime) {
		t.Errorf("SetFileInfo filled %+v", got)
	}
}
