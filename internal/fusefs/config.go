package fusefs

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the mount's options. Each cache layer is named after the
// GlusterFS translator its users know; NoCache turns them all off.
type Config struct {
	// AttrTimeout and EntryTimeout are how long the kernel trusts
	// attributes and name lookups without asking (md-cache). Readdir also
	// primes lookups of the names it lists for this long (stat-prefetch).
	AttrTimeout  time.Duration
	EntryTimeout time.Duration
	// NegativeTimeout is how long the kernel remembers that a name does not
	// exist. Zero asks every time.
	NegativeTimeout time.Duration
	// PrefetchTimeout is how long a directory listing fetched for a burst
	// of look-up misses in the directory answers look-ups of its names
	// (stat-prefetch, prefetch.go); this mount's own changes drop it at
	// once. Zero turns it off.
	PrefetchTimeout time.Duration

	// ReadAhead is how many bytes a sequential reader's request is widened
	// to, in one call to the chunkservers. Zero reads only what is asked.
	ReadAhead int
	// WriteBehind is how many bytes of writes an open file buffers before
	// pushing them in large chunk-aligned writes; scattered writes are
	// held until they join, up to 8 times as many bytes. Errors surface on
	// close or fsync. Zero writes through.
	WriteBehind int
	// FlushSize is the largest single write WriteBehind pushes; writes are
	// split at multiples of it, which keeps them inside chunks.
	FlushSize int
	// KeepCache keeps the kernel page cache of a file across opens while
	// its size and mtime are unchanged (io-cache).
	KeepCache bool
	// CacheSize is how many bytes of file data the mount keeps in its own
	// memory across opens (io-cache's cache-size), for reads the kernel's
	// page cache no longer holds. Zero disables it.
	CacheSize int64
	// QuickRead reads files of at most this many bytes whole on open, in
	// one round trip. Zero disables it.
	QuickRead int
	// WritebackCache lets the kernel buffer writes in its page cache and
	// send them to the mount in large batches (FUSE_WRITEBACK_CACHE), so a
	// write(2) costs no round trip. close(2) and fsync(2) still push
	// everything to the cluster. The kernel then trusts its own size and
	// mtime of a cached file, so an open that finds the file changed on
	// the cluster makes the kernel drop its inode (see node.Open).
	WritebackCache bool
	// AsyncClose, when positive, lets close(2) of a written file return
	// before its writes reach the replicas: up to this many files' pushes
	// run in the background (asyncclose.go). fsync(2) waits for its
	// file's, and so do an open, a look-up or a stat of the file; a push
	// that fails is returned by the file's next close or fsync, and
	// logged. Zero: close returns once the data is on every replica.
	AsyncClose int
	// AsyncCreate, when positive, lets create(2) return before the
	// master has the file: the mount answers with attributes and an
	// inode number of its own, and up to this many creates run in the
	// background, in batches (asynccreate.go). The file's I/O, fsync of
	// it or of its directory, and every other call naming it wait for
	// its create; a create the master refuses drops the name and fails
	// the file's close or fsync with EIO. Zero: create waits.
	AsyncCreate int
	// DirtyLimit, when positive, lifts the kernel's dirty-page limit of
	// the mount (FUSE's is 1 % of the dirty memory, strictly enforced) to
	// this many bytes, through /sys/class/bdi; only root may. Without it
	// the kernel throttles a writer to the mount's speed after a few MiB.
	DirtyLimit int64

	// OpTimeout bounds every call to the cluster; a call that runs out of
	// it fails with EIO (for instance while the master is unreachable).
	OpTimeout time.Duration
	// MountTimeout bounds the check at mount time that the cluster answers.
	MountTimeout time.Duration

	// AllowOther lets other users' processes use the mount; the kernel
	// enforces permissions from the attributes (default_permissions) and
	// the master checks them again as the calling user.
	AllowOther bool
	// MaxWrite is the largest write the kernel sends in one request.
	MaxWrite int
	// FsName is shown as the source in /proc/mounts.
	FsName string
	// Debug logs every FUSE request.
	Debug bool
	// Ops, when set, is told of every FUSE operation the mount answers
	// (metrics; observe.go).
	Ops OpObserver
}

// DefaultConfig returns the defaults: every cache layer on.
func DefaultConfig() Config {
	return Config{
		AttrTimeout:     time.Second,
		EntryTimeout:    time.Second,
		NegativeTimeout: 0,
		PrefetchTimeout: time.Second,
		ReadAhead:       4 << 20,
		WriteBehind:     8 << 20,
		FlushSize:       4 << 20,
		KeepCache:       true,
		QuickRead:       128 << 10,
		WritebackCache:  true,
		CacheSize:       1 << 30,
		DirtyLimit:      2 << 30,
		OpTimeout:       30 * time.Second,
		MountTimeout:    10 * time.Second,
		MaxWrite:        1 << 20,
		FsName:          "chunkfs",
	}
}

// NoCache returns c with every cache layer off: attributes and names are
// asked for on every use, reads and writes go straight to the cluster and
// the page cache is dropped at every open.
func (c Config) NoCache() Config {
	c.AttrTimeout, c.EntryTimeout, c.NegativeTimeout, c.PrefetchTimeout = 0, 0, 0, 0
	c.ReadAhead, c.WriteBehind, c.QuickRead = 0, 0, 0
	c.KeepCache, c.WritebackCache, c.DirtyLimit, c.CacheSize = false, false, 0, 0
	return c
}

// Validate reports the first option that is out of range.
func (c Config) Validate() error {
	switch {
	case c.AttrTimeout < 0 || c.EntryTimeout < 0 || c.NegativeTimeout < 0 || c.PrefetchTimeout < 0:
		return errors.New("fusefs: cache timeouts must not be negative")
	case c.ReadAhead < 0 || c.ReadAhead > 64<<20:
		return fmt.Errorf("fusefs: read-ahead %d out of range [0, 64 MiB]", c.ReadAhead)
	case c.WriteBehind < 0 || c.WriteBehind > 256<<20:
		return fmt.Errorf("fusefs: write-behind %d out of range [0, 256 MiB]", c.WriteBehind)
	case c.FlushSize < 64<<10 || c.FlushSize > 64<<20 || c.FlushSize&(c.FlushSize-1) != 0:
		return fmt.Errorf("fusefs: flush size %d must be a power of two in [64 KiB, 64 MiB]", c.FlushSize)
	case c.QuickRead < 0 || c.QuickRead > 16<<20:
		return fmt.Errorf("fusefs: quick-read %d out of range [0, 16 MiB]", c.QuickRead)
	case c.CacheSize < 0 || c.CacheSize > 64<<30:
		return fmt.Errorf("fusefs: cache size %d out of range [0, 64 GiB]", c.CacheSize)
	case c.DirtyLimit < 0 || c.DirtyLimit > 64<<30:
		return fmt.Errorf("fusefs: dirty limit %d out of range [0, 64 GiB]", c.DirtyLimit)
	case c.OpTimeout <= 0 || c.MountTimeout <= 0:
		return errors.New("fusefs: operation and mount timeouts must be positive")
	case c.AsyncClose < 0 || c.AsyncClose > 4096:
		return fmt.Errorf("fusefs: async close %d out of range [0, 4096]", c.AsyncClose)
	case c.AsyncCreate < 0 || c.AsyncCreate > 4096:
		return fmt.Errorf("fusefs: async create %d out of range [0, 4096]", c.AsyncCreate)
	case c.MaxWrite < 4<<10 || c.MaxWrite > 1<<20:
		return fmt.Errorf("fusefs: max write %d out of range [4 KiB, 1 MiB]", c.MaxWrite)
	}
	return nil
}
