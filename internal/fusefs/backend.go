package fusefs

import (
	"context"
	"io/fs"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/locks"
)

// Backend is what the mount needs of a chunkfs cluster: path-based metadata
// calls acting as a given caller, and open files for data. Paths are
// absolute and slash-separated ("/" is the root). Errors are *chunkfs.Error;
// the mount decides on their Kind only (see errno.go).
//
// NewClientBackend adapts the client library to it; the tests also run the
// POSIX suite against an in-memory twin.
type Backend interface {
	// Stat describes path without following a final symbolic link.
	Stat(ctx context.Context, c chunkfs.Caller, path string) (*chunkfs.FileInfo, error)
	// ReadDir lists a directory with the attributes of each entry.
	ReadDir(ctx context.Context, c chunkfs.Caller, path string) ([]*chunkfs.FileInfo, error)
	// Mkdir makes a directory with exactly the permission bits perm, and
	// also returns the parent directory's attributes just after, or nil.
	Mkdir(ctx context.Context, c chunkfs.Caller, path string, perm fs.FileMode) (fi, parent *chunkfs.FileInfo, err error)
	// Create makes a regular file with exactly the permission bits perm and
	// opens it for reading and writing. If path exists, exclusive fails
	// with KindExist, truncate empties it, and otherwise it is opened. It
	// also returns the parent directory's attributes just after a create,
	// or nil.
	// A file it makes gets atime and mtime at, unless zero (the times
	// an asynchronous create answered), in the create itself.
	Create(ctx context.Context, c chunkfs.Caller, path string, perm fs.FileMode, exclusive, truncate bool, at time.Time) (f File, fi, parent *chunkfs.FileInfo, err error)
	// Open opens an existing regular file for reading, and for writing too
	// when write is set.
	Open(ctx context.Context, c chunkfs.Caller, path string, write bool) (File, *chunkfs.FileInfo, error)
	// Remove removes a file, a symbolic link or an empty directory, and
	// returns the parent directory's attributes just after, or nil.
	Remove(ctx context.Context, c chunkfs.Caller, path string) (parent *chunkfs.FileInfo, err error)
	// Rename moves src to dst atomically, replacing dst; with
	// RenameNoReplace it fails with KindExist if dst exists, and with
	// RenameExchange it swaps src and dst, which must both exist.
	Rename(ctx context.Context, c chunkfs.Caller, src, dst string, how RenameHow) error
	// Link gives the file at oldpath (any type but a directory) the
	// further name newpath, as link(2), and describes it: one inode, two
	// names.
	Link(ctx context.Context, c chunkfs.Caller, oldpath, newpath string) (*chunkfs.FileInfo, error)
	// SetAttr changes the attributes set in a, atomically.
	SetAttr(ctx context.Context, c chunkfs.Caller, path string, a SetAttr) (*chunkfs.FileInfo, error)
	// Mknod makes a fifo, a socket or a device node of number dev (the
	// type bits of mode) with exactly the permission bits of mode: a
	// metadata-only inode.
	Mknod(ctx context.Context, c chunkfs.Caller, path string, mode fs.FileMode, dev uint32) (*chunkfs.FileInfo, error)
	// Symlink makes a symbolic link at path pointing to target, and also
	// returns the parent directory's attributes just after, or nil.
	Symlink(ctx context.Context, c chunkfs.Caller, target, path string) (fi, parent *chunkfs.FileInfo, err error)
	// Readlink returns the target of the symbolic link at path.
	Readlink(ctx context.Context, c chunkfs.Caller, path string) (string, error)
	// Usage reports the cluster's capacity, for statfs.
	Usage(ctx context.Context) (Usage, error)
	// GetXattr returns the value of extended attribute name of path;
	// KindNoAttr when it has none.
	GetXattr(ctx context.Context, c chunkfs.Caller, path, name string) ([]byte, error)
	// ListXattr lists the names of path's extended attributes c may see.
	ListXattr(ctx context.Context, c chunkfs.Caller, path string) ([]string, error)
	// SetXattr sets extended attribute name of path, as setxattr(2) with
	// flags XATTR_CREATE (1) or XATTR_REPLACE (2).
	SetXattr(ctx context.Context, c chunkfs.Caller, path, name string, value []byte, flags uint32) error
	// RemoveXattr removes extended attribute name of path.
	RemoveXattr(ctx context.Context, c chunkfs.Caller, path, name string) error
	// LockSession opens (session 0), renews, adopts after a master change
	// (reclaim) or closes (close) a lock session, returning it and its
	// lifetime.
	LockSession(ctx context.Context, session uint64, reclaim, close bool) (uint64, time.Duration, error)
	// Lock tests (test), takes, or releases (unlock) l of l.Session on the
	// file at path of inode ino; it returns whether it was (or would be)
	// granted, or the lock in the way.
	Lock(ctx context.Context, c chunkfs.Caller, path string, ino uint64, l locks.Lock, unlock, test, reclaim bool) (bool, locks.Lock, error)
}

// File is an open file of a Backend.
type File interface {
	// ReadAt reads len(p) bytes at off; at the end of the file it returns
	// fewer bytes and io.EOF. Holes read as zeros.
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	// WriteAt writes p at off, extending the file (sparse) if needed.
	WriteAt(ctx context.Context, p []byte, off int64) (int, error)
	// Sync makes what was written durable on every replica.
	Sync(ctx context.Context) error
	// Close releases the file.
	Close() error
	// Moved tells the file that the mount renamed it to path (no I/O
	// through it runs meanwhile): a Backend that names open files by
	// path names it there from now on.
	Moved(path string) error
}

// RenameHow is how a rename treats an existing target, as rename(2)'s
// RENAME_NOREPLACE and RENAME_EXCHANGE.
type RenameHow uint8

// The ways of RenameHow.
const (
	RenameReplace   RenameHow = iota // replace the target
	RenameNoReplace                  // fail if the target exists
	RenameExchange                   // swap source and target
)

// SetAttr lists attribute changes; nil fields stay as they are.
type SetAttr struct {
	Perm  *fs.FileMode // permission bits, setuid, setgid and sticky
	UID   *uint32
	GID   *uint32
	ATime *time.Time
	MTime *time.Time
	Size  *int64 // truncate or extend (sparse)
	// TimesNow: both times are set to now (utimensat's UTIME_NOW), which
	// a writer may do; times of the caller's choosing need the owner.
	TimesNow bool
}

// Usage is the capacity of a cluster in bytes, and its file count.
type Usage struct {
	Capacity int64
	Used     int64
	Free     int64
	Files    int64
}
