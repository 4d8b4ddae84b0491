// Package namespace is the master's metadata state machine: the tree of
// directories whose entries name inodes (files, directories, symbolic
// links, fifos, sockets and device nodes; a non-directory may have several
// names, hard links), each file's chunk list (handle and version per chunk
// index), the handle counter, the lease horizon, and the chunkservers an
// operator is decommissioning, and the trash: deleted files and trees kept
// for a grace period in which they can be undeleted (trash.go).
//
// It is pure and deterministic: no goroutines, no clock reads, no I/O. Every
// mutation is a Command (encoded compactly for the replicated log) carrying
// its own timestamp and caller, applied by Apply; the same sequence of
// commands gives the same state on every replica. Reads (Stat, List, Chunks,
// ...) never change state. A Namespace is not safe for concurrent use: the
// owner serialises Apply against reads (the master holds a RWMutex); the
// one exception is a checkpoint's Frozen.Write, which runs alongside
// Apply (freeze.go).
//
// Invalid commands (bad paths, missing permission, wrong file types) return
// an error in their Result and change nothing.
package namespace

import (
	"io/fs"
	"unsafe"

	"github.com/chunkfs/chunkfs"
)

// RootInode is the inode number of the root directory.
const RootInode = 1

// Limits that keep hostile input bounded.
const (
	// MaxGroups bounds the groups a caller may name.
	MaxGroups = 64
	// MaxListLimit is the most entries one List page returns.
	MaxListLimit = 1000
	// MaxChunkCount is the most chunks one Chunks call returns.
	MaxChunkCount = 1000
	// MaxFileChunks bounds the chunk index of a file (2^24 chunks of 64 MiB
	// is a 1 PiB file).
	MaxFileChunks = 1 << 24
	// MaxLinks bounds the names of one inode, as ext4's link limit does.
	MaxLinks = 65000
)

// chunkRef is one entry of a file's chunk list; handle 0 is a hole.
type chunkRef struct {
	handle  chunkfs.Handle
	version chunkfs.Version
}

// inode is a file, directory, symbolic link or metadata-only inode. It
// has no name: directory entries (children) name inodes, and a
// non-directory may have several (hard links); its chunks belong to it,
// whatever names it. Its layout is kept to 80 bytes, a class of Go's
// allocator (TestInodeSize): the chunk list without a slice's third word,
// the link count in 16 bits.
type inode struct {
	ext    *ext      // directories, symbolic links and device nodes, and inodes with extended attributes
	list   chunkList // its chunks (chunks, setChunks)
	ino    uint64
	length int64
	mtime  int64 // Unix nanoseconds
	atime  int64
	ctime  int64
	mode   fs.FileMode
	uid    uint32
	gid    uint32
	nlink  uint16 // directory entries naming it (at most MaxLinks): 0 for the root, 1 for any other directory
	repl   uint8
	dead   bool // in the trash (markDead)
}

// ext holds what only directories, symbolic links and device nodes need,
// and the extended attributes of any inode that has some.
type ext struct {
	kids   children
	parent *inode // a directory's parent (its ".."); nil for the root
	target string
	rdev   uint32  // a device node's device number (Linux's encoding)
	xattrs []xattr // sorted by name
}

// chunkList is a file's chunk list as a slice's pointer, length and
// capacity, the last two in 32 bits (a file has at most MaxFileChunks):
// 16 bytes in the inode where a slice takes 24.
type chunkList struct {
	p    *chunkRef
	n, c uint32
}

// chunks returns n's chunk list, nil when it has none. It aliases the
// list: a change of a ref through it is a change of n's.
func (n *inode) chunks() []chunkRef {
	if n.list.p == nil {
		return nil
	}
	return unsafe.Slice(n.list.p, n.list.c)[:n.list.n]
}

// setChunks makes refs n's chunk list.
func (n *inode) setChunks(refs []chunkRef) {
	if refs == nil {
		n.list = chunkList{}
		return
	}
	n.list = chunkList{p: unsafe.SliceData(refs), n: uint32(len(refs)), c: uint32(cap(refs))}
}

func (n *inode) isDir() bool     { return n.mode&fs.ModeDir != 0 }
func (n *inode) isSymlink() bool { return n.mode&fs.ModeSymlink != 0 }
func (n *inode) isFile() bool    { return n.mode&fs.ModeType == 0 }

// specialTypes are the types of metadata-only inodes: fifos, sockets and
// device nodes have a name, an owner, a mode and times (and a device
// number), and never a chunk.
const specialTypes = fs.ModeNamedPipe | fs.ModeSocket | fs.ModeDevice | fs.ModeCharDevice

func (n *inode) isSpecial() bool { return n.mode&specialTypes != 0 }
func (n *inode) isDevice() bool  { return n.mode&fs.ModeDevice != 0 }

// validSpecial reports whether the special type bits of m name one type
// (a char device is ModeDevice|ModeCharDevice) or none.
func validSpecial(m fs.FileMode) bool {
	switch m & specialTypes {
	case 0, fs.ModeNamedPipe, fs.ModeSocket, fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return true
	}
	return false
}

// Namespace is the whole replicated metadata state.
type Namespace struct {
	root         *inode
	handles      handleIndex // every live chunk → its (first) holder
	nextInode    uint64
	nextHandle   chunkfs.Handle
	chunkSize    int64
	defaultRepl  uint8
	leaseHorizon int64                         // Unix ns; no lease granted by any master lasts beyond it
	draining     []string                      // IDs of the chunkservers being decommissioned, sorted (servers.go)
	files, dirs  int64                         // live inodes (symbolic links and special files count as files; a hard link adds none)
	bytes        int64                         // sum of live file lengths
	safe         safeHold                      // an operator's safe mode (safemode.go)
	clusterID    string                        // the cluster's identity, set once (clusterid.go)
	trash        trashBin                      // what was deleted and may be undeleted (trash.go)
	held         map[chunkfs.Handle][]HeldBack // replicas not counted at a version, each chunk's sorted by server (heldback.go)
	heldCount    int                           // the facts in held
	cow          *cowState                     // the checkpoint being written, if any (freeze.go)
}

// New returns an empty namespace: a root directory owned by root with mode
// 0755, not yet initialised (chunk operations fail until an OpInit command
// sets the chunk size).
func New() *Namespace {
	return &Namespace{
		root:       &inode{ino: RootInode, mode: fs.ModeDir | 0o755, ext: &ext{}},
		handles:    newHandleIndex(),
		nextInode:  RootInode + 1,
		nextHandle: 1,
		dirs:       1,
	}
}

// ChunkSize returns the cluster's chunk size, 0 before initialisation.
func (ns *Namespace) ChunkSize() int64 { return ns.chunkSize }

// DefaultReplication returns the replication given to files created with 0.
func (ns *Namespace) DefaultReplication() int { return int(ns.defaultRepl) }

// Initialized reports whether an OpInit command has been applied.
func (ns *Namespace) Initialized() bool { return ns.chunkSize > 0 }

// LeaseHorizon returns the time (Unix ns) before which a lease granted by a
// previous master might still be valid.
func (ns *Namespace) LeaseHorizon() int64 { return ns.leaseHorizon }

// NextHandle returns the handle the next allocated chunk will get; every
// existing chunk's handle is below it.
func (ns *Namespace) NextHandle() chunkfs.Handle { return ns.nextHandle }

// Counts summarises the namespace.
type Counts struct {
	Files, Dirs, Chunks, Bytes int64
}

// Counts returns the number of live files, directories and chunks and the
// sum of live file lengths; DeadCounts has what the trash holds.
func (ns *Namespace) Counts() Counts {
	return Counts{Files: ns.files, Dirs: ns.dirs, Chunks: int64(ns.handles.len()) - ns.trash.dead.Chunks, Bytes: ns.bytes}
}
