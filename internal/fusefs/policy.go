package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The caching modes are chosen once, when the mount is made (newMount),
// each as one value behind an interface; open, create, read, write,
// flush, fsync and release call them and never test the Config:
//
//   - kernelCache, how the kernel's page cache of a file is kept
//     across opens: per-version FUSE generations with the kernel's
//     write-back cache (generations, writeback.go), or the version the
//     page cache holds kept per node (pageCache);
//   - dataCache, file data kept in the mount's memory across opens: the
//     block cache (blockcache.go) or none (noData);
//   - reader, what a read the handle's window misses fetches: what was
//     asked (direct), a window ahead of a sequential reader (readAhead),
//     or either rounded out to whole cache blocks (blockReader);
//   - newWriter, per open file: write-through or write-behind
//     (writebehind.go).

// kernelCache keeps the kernel's page cache of a file across opens.
type kernelCache interface {
	// lookedUp returns the FUSE generation of the regular file fi.
	lookedUp(fi *chunkfs.FileInfo) uint64
	// open decides the FUSE open flags of an open (for writing: write)
	// of n, whose version on the cluster is fi, and counts the open;
	// ESTALE makes the kernel look the file up again. created: Create
	// just made n's inode.
	open(n *node, fi *chunkfs.FileInfo, write, created bool) (uint32, syscall.Errno)
	// push pushes the writes a close or fsync of h must make durable.
	push(ctx context.Context, h *handle) error
	// flushed runs at close(2) of h, after push succeeded.
	flushed(ctx context.Context, h *handle) error
	// releasing runs first at h's release; released after h's file is
	// closed on the cluster.
	releasing(h *handle)
	released(ctx context.Context, h *handle)
	// forgot runs when the kernel forgets n.
	forgot(n *node)
	// retimed follows a change of only n's times, from before to after.
	retimed(n *node, before, after version)
	// placesAppends reports whether the kernel places the writes of an
	// O_APPEND descriptor at the size it caches and never takes a size
	// from the mount for a file it caches (pendingFile).
	placesAppends() bool
}

// newKernelCache chooses the kernel cache policy of cfg.
func newKernelCache(cfg Config, files *files) kernelCache {
	if cfg.WritebackCache {
		return generations{files: files, keep: cfg.KeepCache}
	}
	return pageCache{keep: cfg.KeepCache}
}

// generations is the kernel cache with FUSE_WRITEBACK_CACHE: each version
// of a file is a FUSE generation of its own (writeback.go).
type generations struct {
	files *files
	keep  bool // Config.KeepCache
}

func (g generations) lookedUp(fi *chunkfs.FileInfo) uint64 { return g.files.lookedUp(fi) }

func (g generations) open(n *node, fi *chunkfs.FileInfo, write, created bool) (uint32, syscall.Errno) {
	st := n.StableAttr()
	keep, stale := g.files.opened(st.Ino, st.Gen, versionOf(fi), write)
	if stale && !created { // never stale when created: entry just made it current
		// The kernel's inode caches another version of the file: the
		// kernel retries with a lookup that gets a fresh one.
		return 0, syscall.ESTALE
	}
	if keep && g.keep {
		return fuse.FOPEN_KEEP_CACHE, 0
	}
	return 0, 0
}

// push: the kernel has sent every dirty page of the file before a flush
// or fsync, on whichever open handle it chose, so every handle's buffer
// is pushed; h's own error is returned too.
func (g generations) push(ctx context.Context, h *handle) error {
	if err := h.n.flushAll(ctx); err != nil {
		return err
	}
	return h.w.flush(ctx)
}

// flushed records the cluster's version of a file this mount wrote as the
// one the kernel caches.
func (g generations) flushed(ctx context.Context, h *handle) error {
	n := h.n
	if !n.written.Swap(false) {
		return nil
	}
	fi, err := n.m.b.Stat(ctx, chunkfs.Root, n.path())
	if err != nil {
		n.written.Store(true)
		return err
	}
	st := n.StableAttr()
	if foundOther(h.f) {
		// The kernel's inode stays at the version it was made with,
		// which the next open finds stale.
		n.m.data.drop(st.Ino)
		return nil
	}
	g.files.wrote(st.Ino, st.Gen, versionOf(fi))
	n.m.data.pushed(st.Ino, versionOf(fi))
	return nil
}

// releasing uncounts the open first: an open that follows the close must
// not take this handle for one still open (the file's client close can
// take a while).
func (g generations) releasing(h *handle) { g.files.closed(h.n.StableAttr().Ino, h.write) }

func (g generations) released(context.Context, *handle) {}

func (g generations) forgot(n *node) {
	if st := n.StableAttr(); st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		g.files.forgot(st.Ino, st.Gen)
	}
}

func (generations) placesAppends() bool { return true }

func (g generations) retimed(n *node, before, after version) {
	st := n.StableAttr()
	g.files.retimed(st.Ino, st.Gen, before, after)
}

// pageCache is the kernel cache without FUSE_WRITEBACK_CACHE: each node
// remembers the version its pages hold (node.cached), and an open of that
// version keeps them (io-cache, when keep).
type pageCache struct {
	keep bool // Config.KeepCache
}

func (pageCache) lookedUp(*chunkfs.FileInfo) uint64 { return 0 }

// open keeps the page cache if it holds version fi and, for an open of an
// existing file, makes the kernel drop attributes it may hold from before.
func (p pageCache) open(n *node, fi *chunkfs.FileInfo, _, created bool) (uint32, syscall.Errno) {
	v := versionOf(fi)
	n.mu.Lock()
	keep := p.keep && n.cached == v
	n.cached = v
	n.mu.Unlock()
	if keep {
		return fuse.FOPEN_KEEP_CACHE, 0
	}
	// The size the kernel caches may be older than the open: drop it so
	// that reads ask again (close-to-open). Pages go too, as the open
	// lacks FOPEN_KEEP_CACHE. A negative offset touches attributes only
	// and takes no lock the open holds.
	if !created {
		n.NotifyContent(-1, 0)
	}
	return 0, 0
}

// placesAppends: the kernel takes the mount's size when its attributes
// expire.
func (pageCache) placesAppends() bool { return false }

// push: the kernel sends writes on the descriptor they were made on.
func (pageCache) push(ctx context.Context, h *handle) error { return h.w.flush(ctx) }

func (pageCache) flushed(context.Context, *handle) error { return nil }

func (pageCache) releasing(*handle) {}

// released records the version of the file after this mount wrote it:
// the page cache holds exactly that, so the next open may keep it.
func (pageCache) released(ctx context.Context, h *handle) {
	if !h.write {
		return
	}
	n := h.n
	fi, err := n.m.b.Stat(ctx, chunkfs.Root, n.path())
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil || foundOther(h.f) {
		n.cached = version{}
		n.m.data.drop(n.StableAttr().Ino)
		return
	}
	n.cached = versionOf(fi)
	n.m.data.pushed(n.StableAttr().Ino, n.cached)
}

func (pageCache) forgot(*node) {}

func (pageCache) retimed(*node, version, version) {}

// dataCache keeps file data in the mount's memory across opens, by inode
// number; *blockCache is the one, noData keeps nothing. Its methods are
// documented on blockCache.
type dataCache interface {
	opened(ino uint64, v version, write bool)
	closed(ino uint64, write bool)
	pushed(ino uint64, v version)
	retimed(ino uint64, before, after version)
	generation(ino uint64) uint64
	read(ino uint64, dest []byte, off int64) (n int, ok bool)
	fill(ino, wgen uint64, off int64, data []byte, eof bool)
	write(ino uint64, p []byte, off int64)
	drop(ino uint64)
}

// noData is the data cache of a mount without a block cache.
type noData struct{}

func (noData) opened(uint64, version, bool)             {}
func (noData) closed(uint64, bool)                      {}
func (noData) pushed(uint64, version)                   {}
func (noData) retimed(uint64, version, version)         {}
func (noData) generation(uint64) uint64                 { return 0 }
func (noData) read(uint64, []byte, int64) (int, bool)   { return 0, false }
func (noData) fill(uint64, uint64, int64, []byte, bool) {}
func (noData) write(uint64, []byte, int64)              {}
func (noData) drop(uint64)                              {}

// reader decides what a read that neither the data cache nor the
// handle's window holds fetches from the cluster.
type reader interface {
	// span returns the bytes [lo, lo+want) to fetch for a read of n
	// bytes at off, by a sequential reader or not; ahead says the fetch
	// reads ahead of the reader and is kept as the handle's window.
	span(h *handle, off int64, n int, sequential bool) (lo int64, want int, ahead bool)
}

// newReader chooses the reader of cfg.
func newReader(cfg Config) reader {
	var r reader = direct{}
	if cfg.ReadAhead > 0 {
		r = readAhead{size: cfg.ReadAhead}
	}
	if cfg.CacheSize > 0 {
		r = blockReader{r}
	}
	return r
}

// direct fetches what was asked.
type direct struct{}

func (direct) span(_ *handle, off int64, n int, _ bool) (int64, int, bool) { return off, n, false }

// readAhead widens a sequential reader's reads to size bytes.
type readAhead struct{ size int }

func (r readAhead) span(h *handle, off int64, n int, sequential bool) (int64, int, bool) {
	if !sequential || r.size <= n {
		return off, n, false
	}
	// Up to the end the file had at open and a byte more, to see it: a
	// 4 KiB file's read needs no 4 MiB buffer.
	return off, int(min(int64(r.size), max(int64(n), h.size-off+1))), true
}

// blockReader fetches whole cache blocks, so that the block cache keeps
// all of a fetch and a random reader's later reads nearby hit it.
type blockReader struct{ next reader }

func (r blockReader) span(h *handle, off int64, n int, sequential bool) (int64, int, bool) {
	_, want, ahead := r.next.span(h, off, n, sequential)
	lo := off &^ (cacheBlockSize - 1)
	return lo, int((off + int64(want) - lo + cacheBlockSize - 1) &^ (cacheBlockSize - 1)), ahead
}

// writer is how an open file's writes reach the cluster.
type writer interface {
	// write writes or buffers p at off.
	write(ctx context.Context, p []byte, off int64) (int, error)
	// flush pushes what is buffered and returns the first error of any
	// push since the open (or since the error was reported).
	flush(ctx context.Context) error
	// dirtyEnd is the end of the furthest byte not yet pushed, or 0.
	dirtyEnd() int64
	// hasDirty reports whether bytes wait to be pushed.
	hasDirty() bool
	// reported forgets the push error that the handle's close (or the
	// closer, at the file's next close or fsync) returned: an fsync through
	// another handle of the file does not return it again.
	reported()
}

// newWriter chooses how the files cfg's mount opens write: write-behind
// for files open for writing when cfg.WriteBehind is set, else through.
func newWriter(cfg Config) func(f File, write bool) writer {
	if cfg.WriteBehind == 0 {
		return func(f File, _ bool) writer { return writeThrough{f: f, timeout: cfg.OpTimeout} }
	}
	return func(f File, write bool) writer {
		if !write {
			return writeThrough{f: f, timeout: cfg.OpTimeout}
		}
		return newWriteBehind(f, cfg.WriteBehind, cfg.FlushSize, cfg.OpTimeout)
	}
}

// writeThrough writes each write to the cluster before answering it.
type writeThrough struct {
	f       File
	timeout time.Duration // Config.OpTimeout
}

// write ignores the kernel's interrupts, as mount.mutation does.
func (w writeThrough) write(ctx context.Context, p []byte, off int64) (int, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.timeout)
	defer cancel()
	return w.f.WriteAt(cctx, p, off)
}

func (writeThrough) flush(context.Context) error { return nil }
func (writeThrough) dirtyEnd() int64             { return 0 }
func (writeThrough) hasDirty() bool              { return false }
func (writeThrough) reported()                   {}

var (
	_ dataCache = (*blockCache)(nil)
	_ writer    = (*writeBehind)(nil)
)
