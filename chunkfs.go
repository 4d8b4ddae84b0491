// Package chunkfs is the shared vocabulary of chunkfs, a distributed file
// system after the Google File System: chunk handles and versions, sizes and
// limits, file metadata and the error type whose Kind crosses RPC.
//
// Error is the one error type of every layer: {Op, Path, Kind, Err}. The
// Kind is what callers decide on (the client's retries, the CLI's exit
// status, the mount's errno), never the text; it crosses RPC intact, and
// errors.Is matches it against fs.ErrNotExist and the other io/fs errors.
//
// It imports nothing of chunkfs's own; every other package may import it.
// Users import github.com/chunkfs/chunkfs/client to talk to a cluster and
// github.com/chunkfs/chunkfs/chunkfstest to start one in their own tests.
package chunkfs

import (
	"io/fs"
	"slices"
	"time"
)

// Handle names a chunk. The master assigns handles from a counter in its
// replicated state; a handle is never reused and never derived from user input.
type Handle uint64

// Version is a chunk's version number. The master bumps it (through its log)
// every time it grants a new lease; a replica with an older version is stale
// and is never served.
type Version uint64

// StateID is the index of the last log entry a master has applied. Every
// master response carries one; clients keep the highest they have seen.
type StateID uint64

// DataID names a buffer of pushed data held by chunkservers until a write or
// record append applies it.
type DataID uint64

// Sizes and limits shared by every role.
const (
	// DefaultChunkSize is the size of a chunk unless a cluster sets another.
	DefaultChunkSize = 64 << 20
	// BlockSize is the unit of checksumming inside a chunk.
	BlockSize = 64 << 10
	// MaxFrameSize bounds a frame of the bulk data stream.
	MaxFrameSize = BlockSize
	// DefaultReplication is the number of replicas of a chunk unless a file
	// says otherwise.
	DefaultReplication = 3
	// MaxReplication bounds a file's replication factor.
	MaxReplication = 16
	// MaxNameLen bounds one component of a path, in bytes.
	MaxNameLen = 255
	// MaxPathLen bounds a whole path in the cluster, in bytes: four
	// times Linux's PATH_MAX, which bounds only the path one system call
	// is given. A FUSE mount's process may hand a PATH_MAX relative path
	// to a call from a directory deep in the tree, and the cluster sees
	// the two together.
	MaxPathLen = 16 << 10
	// MaxSymlinkLen bounds a symbolic link's target, in bytes.
	MaxSymlinkLen = 4096
	// LeaseDuration is how long a primary holds a chunk lease unless extended.
	LeaseDuration = 60 * time.Second
)

// MaxRecordSize is the largest record that Append accepts for a chunk size:
// a quarter of a chunk, as in GFS.
func MaxRecordSize(chunkSize int64) int64 { return chunkSize / 4 }

// Caller is the identity a request acts as. UID 0 is the superuser, and so
// is a caller marked Super.
type Caller struct {
	UID  uint32
	GIDs []uint32 // primary group first
	// Super marks a member of the master's superuser group. The master
	// alone sets it, from its configuration; it never travels in a request.
	Super bool
}

// Superuser reports whether c is the superuser: UID 0 or marked Super.
func (c *Caller) Superuser() bool { return c.UID == 0 || c.Super }

// Root is the superuser.
var Root = Caller{UID: 0, GIDs: []uint32{0}}

// Access is a set of access bits, as in access(2).
type Access uint32

// Access bits.
const (
	AccessExec  Access = 1
	AccessWrite Access = 2
	AccessRead  Access = 4
)

// Allows reports whether c has every access bit in want on a file or
// directory of the given mode, owner and group, by the owner, group and
// other permission bits. The superuser may do anything, except execute a
// file that has no execute bit at all.
func (c *Caller) Allows(mode fs.FileMode, uid, gid uint32, want Access) bool {
	perm := Access(mode.Perm())
	if c.Superuser() {
		return want&AccessExec == 0 || mode.IsDir() || perm&0o111 != 0
	}
	var bits Access
	switch {
	case c.UID == uid:
		bits = perm >> 6
	case slices.Contains(c.GIDs, gid):
		bits = perm >> 3
	default:
		bits = perm
	}
	return bits&want == want
}

// FileInfo describes a file or directory. It implements fs.FileInfo.
type FileInfo struct {
	Inode       uint64
	FileName    string      // base name
	Length      int64       // bytes; Size() returns it
	FileMode    fs.FileMode // type bits and permission bits (incl. setuid, setgid, sticky)
	UID, GID    uint32
	MTime       time.Time
	ATime       time.Time
	CTime       time.Time
	Replication int    // replicas per chunk (files only)
	Target      string // symbolic link target
	Chunks      int64  // number of chunks (files only)
	// Nlink is the number of names the inode has, as st_nlink counts
	// them: 1 for a file or symbolic link, 2 plus its subdirectories
	// for a directory (its entry, its ".", and each subdirectory's "..").
	Nlink uint32
	// Rdev is a device node's device number, in Linux's encoding
	// (major and minor, as stat's st_rdev).
	Rdev uint32
}

var _ fs.FileInfo = (*FileInfo)(nil)

// Name returns the base name.
func (fi *FileInfo) Name() string { return fi.FileName }

// Size returns the length in bytes.
func (fi *FileInfo) Size() int64 { return fi.Length }

// Mode returns the file mode bits.
func (fi *FileInfo) Mode() fs.FileMode { return fi.FileMode }

// ModTime returns the modification time.
func (fi *FileInfo) ModTime() time.Time { return fi.MTime }

// IsDir reports whether fi describes a directory.
func (fi *FileInfo) IsDir() bool { return fi.FileMode.IsDir() }

// Sys returns fi itself.
func (fi *FileInfo) Sys() any { return fi }

// Type returns the type bits, for fs.DirEntry.
func (fi *FileInfo) Type() fs.FileMode { return fi.FileMode.Type() }

// Info returns fi, for fs.DirEntry.
func (fi *FileInfo) Info() (fs.FileInfo, error) { return fi, nil }
