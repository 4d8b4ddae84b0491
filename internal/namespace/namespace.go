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
	"math/bits"
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

// MaxInode bounds inode numbers: an inode keeps its number in 48 bits
// (at 100,000 creates a second, 89 years of them).
const MaxInode = 1 << 48

// inode is a file, directory, symbolic link or metadata-only inode. It
// has no name: directory entries (children) name inodes, and a
// non-directory may have several (hard links); its chunks belong to it,
// whatever names it. Its layout is kept to 64 bytes, a class of Go's
// allocator (TestInodeSize): one pointer serves a file's chunk list and
// the ext of an inode that has one (which then holds the list), the
// chunk count, replication and marks share a word, the list's capacity
// follows from its length (listCap), and the inode number takes 48 bits.
type inode struct {
	p      unsafe.Pointer // *ext when bits has extMark, else the chunk list (*chunkRef; nil without chunks)
	length int64
	mtime  int64 // Unix nanoseconds
	atime  int64
	ctime  int64
	mode   fs.FileMode
	uid    uint32
	gid    uint32
	bits   uint32 // the chunk count (countMask), replication (replShift), extMark, deadMark
	inoLo  uint32 // the inode number's low 32 bits (ino)
	inoHi  uint16
	nlink  uint16 // directory entries naming it (at most MaxLinks): 0 for the root, 1 for any other directory
}

// The fields of inode.bits: a file has at most MaxFileChunks (2^24)
// chunks and MaxReplication (16) replicas.
const (
	countMask = 1<<25 - 1
	replShift = 25
	replMask  = 1<<5 - 1
	extMark   = 1 << 30 // p is an *ext
	deadMark  = 1 << 31 // in the trash (markDead)
)

// ext holds what only directories, symbolic links and device nodes need,
// and the extended attributes of any inode that has some.
type ext struct {
	kids   children
	parent *inode // a directory's parent (its ".."); nil for the root
	target string
	rdev   uint32    // a device node's device number (Linux's encoding)
	xattrs []xattr   // sorted by name
	refs   *chunkRef // the chunk list of a file with extended attributes
}

func (n *inode) ino() uint64 { return uint64(n.inoHi)<<32 | uint64(n.inoLo) }

// setIno numbers n; ino is below MaxInode.
func (n *inode) setIno(ino uint64) { n.inoLo, n.inoHi = uint32(ino), uint16(ino>>32) }

// ext returns n's ext, nil when it has none.
func (n *inode) ext() *ext {
	if n.bits&extMark == 0 {
		return nil
	}
	return (*ext)(n.p)
}

// setExt gives n the ext e (nil: none), which takes over n's chunk list.
func (n *inode) setExt(e *ext) {
	refs := n.listPtr()
	if e == nil {
		n.p, n.bits = unsafe.Pointer(refs), n.bits&^extMark
		return
	}
	e.refs = refs
	n.p, n.bits = unsafe.Pointer(e), n.bits|extMark
}

func (n *inode) listPtr() *chunkRef {
	if e := n.ext(); e != nil {
		return e.refs
	}
	return (*chunkRef)(n.p)
}

func (n *inode) repl() uint8 { return uint8(n.bits >> replShift & replMask) }

// setRepl sets n's replication, at most MaxReplication.
func (n *inode) setRepl(r uint8) { n.bits = n.bits&^(replMask<<replShift) | uint32(r)<<replShift }

func (n *inode) dead() bool { return n.bits&deadMark != 0 }

func (n *inode) setDead(dead bool) {
	n.bits &^= deadMark
	if dead {
		n.bits |= deadMark
	}
}

// listCap is the capacity of a chunk list of k refs: k up to exactRefs
// (each such size is one of the allocator's classes), above it k rounded
// up to three significant bits, so a growing list is copied a bounded
// number of times per doubling and wastes at most a quarter.
func listCap(k int) int {
	if k <= exactRefs {
		return k
	}
	s := bits.Len(uint(k)) - 3
	return (k + 1<<s - 1) >> s << s
}

// chunks returns n's chunk list, nil when it has none. It aliases the
// list: a change of a ref through it is a change of n's. Its capacity is
// listCap of its length.
func (n *inode) chunks() []chunkRef {
	k := int(n.bits & countMask)
	if k == 0 {
		return nil
	}
	return unsafe.Slice(n.listPtr(), listCap(k))[:k]
}

// cloneChunks returns a copy of refs with room for listCap of its length.
func cloneChunks(refs []chunkRef) []chunkRef {
	if len(refs) == 0 {
		return nil
	}
	return append(make([]chunkRef, 0, listCap(len(refs))), refs...)
}

// setChunks makes refs n's chunk list, copied when its capacity is below
// listCap of its length.
func (n *inode) setChunks(refs []chunkRef) {
	var p *chunkRef
	if len(refs) > 0 {
		if cap(refs) < listCap(len(refs)) {
			refs = append(make([]chunkRef, 0, listCap(len(refs))), refs...)
		}
		p = unsafe.SliceData(refs)
	}
	n.bits = n.bits&^countMask | uint32(len(refs))
	if e := n.ext(); e != nil {
		e.refs = p
	} else {
		n.p = unsafe.Pointer(p)
	}
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
		root:       newRoot(),
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

// newRoot returns an empty root directory owned by root with mode 0755.
func newRoot() *inode {
	n := &inode{mode: fs.ModeDir | 0o755}
	n.setIno(RootInode)
	n.setExt(&ext{})
	return n
}
