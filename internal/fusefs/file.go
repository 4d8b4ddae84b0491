package fusefs

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"

	"github.com/chunkfs/chunkfs"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// handle is one open file: the cluster file, its write-behind buffer (nil
// when read-only or writing through) and its read-ahead window.
type handle struct {
	n     *node
	f     File
	name  string // the path f names (guarded by n.mu and names.io held exclusively)
	write bool   // opened for writing
	size  int64  // the file's length on the cluster at open: read-ahead stops there
	wb    *writeBehind
	// counted: the open is counted in the mount's per-inode state
	// (write-back cache), and Release uncounts it.
	counted bool

	mu         sync.Mutex // guards ra and lockOwners
	ra         window
	lockOwners map[lockOwner]bool // owners of locks taken through this open file

	// fetching serialises read-ahead fetches, so that the kernel's
	// concurrent reads of one stream wait for one window instead of each
	// fetching its own.
	fetching sync.Mutex
}

// window is a run of file bytes read ahead of the reader, valid while the
// node's generation is unchanged. Its data is never written in place, so
// slices of it may be handed to the kernel.
type window struct {
	off  int64
	data []byte
	eof  bool   // data ends at the end of the file
	gen  uint64 // node generation it was read at
	next int64  // where a sequential reader reads next
}

// get returns the bytes of [off, off+n) the window holds, if it holds all
// of them (or all up to the end of the file).
func (w *window) get(off int64, n int, gen uint64) ([]byte, bool) {
	if w.data == nil || w.gen != gen || off < w.off {
		return nil, false
	}
	start := off - w.off
	if start > int64(len(w.data)) {
		return nil, false
	}
	end := start + int64(n)
	if end > int64(len(w.data)) {
		if !w.eof {
			return nil, false
		}
		end = int64(len(w.data))
	}
	return w.data[start:end], true
}

var _ = (gofs.NodeOpener)((*node)(nil))

// Open opens a file. It asks the cluster for the file's current size and
// mtime (close-to-open), keeps the kernel's page cache if they are what
// it caches (io-cache), and reads a small file whole (quick-read).
func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	cctx, cancel := n.m.call(ctx)
	defer cancel()
	// Until the handle is counted, a rename must not change what the
	// path names.
	n.m.names.io.RLock()
	locked := true
	defer func() {
		if locked {
			n.m.names.io.RUnlock()
		}
	}()
	p := n.path()
	f, fi, err := n.m.b.Open(cctx, callerOf(ctx), p, write)
	if err != nil {
		return nil, 0, errno(err)
	}
	var fuseFlags uint32
	if n.m.writeback() {
		st := n.StableAttr()
		keep, stale := n.m.files.opened(st.Ino, st.Gen, versionOf(fi))
		if stale {
			// The kernel's inode caches another version of the file:
			// the kernel retries with a lookup that gets a fresh one.
			f.Close()
			return nil, 0, syscall.ESTALE
		}
		if keep && n.m.cfg.KeepCache {
			fuseFlags = fuse.FOPEN_KEEP_CACHE
		}
	} else {
		fuseFlags = n.opened(fi, true)
	}
	h := n.newHandle(f, p, write)
	h.size = fi.Length
	locked = false
	n.m.names.io.RUnlock()
	h.counted = n.m.writeback()
	n.cacheOpened(fi, write)
	if fuseFlags&fuse.FOPEN_KEEP_CACHE == 0 && flags&syscall.O_ACCMODE != syscall.O_WRONLY {
		h.quickRead(cctx, fi)
	}
	return h, fuseFlags, 0
}

var _ = (gofs.NodeCreater)((*node)(nil))

// Create makes and opens a file. mode has the caller's umask applied by
// the kernel, and is used exactly: 0000 stays 0000.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if e := n.checkChild(name); e != 0 {
		return nil, nil, 0, e
	}
	cctx, cancel := n.m.mutation(ctx)
	defer cancel()
	excl, trunc := flags&syscall.O_EXCL != 0, flags&syscall.O_TRUNC != 0
	n.m.names.io.RLock() // until the handle is counted (see Open)
	defer n.m.names.io.RUnlock()
	p := n.child(name)
	f, fi, err := n.m.b.Create(cctx, callerOf(ctx), p, goPerm(mode), excl, trunc)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	ch := n.entry(ctx, fi, out)
	cn := ch.Operations().(*node)
	if cn.m.writeback() {
		st := ch.StableAttr()
		keep, _ := cn.m.files.opened(st.Ino, st.Gen, versionOf(fi)) // never stale: entry just made it current
		h := cn.newHandle(f, p, true)
		h.counted = true
		cn.cacheOpened(fi, true)
		var fl uint32
		if keep && n.m.cfg.KeepCache {
			fl = fuse.FOPEN_KEEP_CACHE
		}
		return ch, h, fl, 0
	}
	h := cn.newHandle(f, p, true)
	cn.cacheOpened(fi, true)
	return ch, h, cn.opened(fi, false), 0
}

// cacheOpened checks the block cache against the file's version fi at
// an open and counts the open.
func (n *node) cacheOpened(fi *chunkfs.FileInfo, write bool) {
	if n.m.cache != nil {
		n.m.cache.opened(n.StableAttr().Ino, versionOf(fi), write)
	}
}

// newHandle counts a handle of f, opened at path p. The names' io is
// held shared.
func (n *node) newHandle(f File, p string, write bool) *handle {
	f = namedFile{File: f, s: n.m.names}
	h := &handle{n: n, f: f, name: p, write: write}
	if write && n.m.cfg.WriteBehind > 0 {
		h.wb = newWriteBehind(f, n.m.cfg.WriteBehind, n.m.cfg.FlushSize, n.m.cfg.OpTimeout)
	}
	n.mu.Lock()
	n.handles[h] = struct{}{}
	if len(n.handles) == 1 {
		n.m.names.opened(n)
	}
	n.mu.Unlock()
	return h
}

// opened decides the open flags for a file whose current state is fi:
// keep the page cache if it holds this version, and (when refresh is set)
// make the kernel drop attributes it may hold from before.
func (n *node) opened(fi *chunkfs.FileInfo, refresh bool) uint32 {
	v := versionOf(fi)
	n.mu.Lock()
	keep := n.m.cfg.KeepCache && n.cached == v
	n.cached = v
	n.mu.Unlock()
	if keep {
		return fuse.FOPEN_KEEP_CACHE
	}
	// The size the kernel caches may be older than the open: drop it so
	// that reads ask again (close-to-open). Pages go too, as the open
	// lacks FOPEN_KEEP_CACHE. A negative offset touches attributes only
	// and takes no lock the open holds.
	if refresh {
		n.NotifyContent(-1, 0)
	}
	return 0
}

// quickRead fills the read window with a whole small file.
func (h *handle) quickRead(ctx context.Context, fi *chunkfs.FileInfo) {
	q := h.n.m.cfg.QuickRead
	if q == 0 || fi.Length == 0 || fi.Length > int64(q) {
		return
	}
	gen := h.n.generation()
	buf := make([]byte, fi.Length+1) // one more byte to see the end
	k, err := h.f.ReadAt(ctx, buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return // the reads will ask again and report the error
	}
	h.mu.Lock()
	h.ra = window{off: 0, data: buf[:k], eof: k <= int(fi.Length), gen: gen}
	h.mu.Unlock()
}

// generation returns the node's write generation.
func (n *node) generation() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gen
}

// bump invalidates every read window of the node.
func (n *node) bump() {
	n.mu.Lock()
	n.gen++
	n.mu.Unlock()
}

// writers returns the open handles that buffer writes.
func (n *node) writers() []*handle {
	n.mu.Lock()
	defer n.mu.Unlock()
	var hs []*handle
	for h := range n.handles {
		if h.wb != nil {
			hs = append(hs, h)
		}
	}
	return hs
}

// flushAll pushes the buffered writes of every open handle of the node, so
// that reads, truncations and renames see them.
func (n *node) flushAll(ctx context.Context) error {
	var first error
	for _, h := range n.writers() {
		if err := h.wb.flush(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// dirtyEnd returns the furthest end of the node's buffered writes.
func (n *node) dirtyEnd() int64 {
	var end int64
	for _, h := range n.writers() {
		end = max(end, h.wb.dirtyEnd())
	}
	return end
}

var _ = (gofs.FileReader)((*handle)(nil))

// Read serves a read from the read-ahead window or the cluster. Writes
// this mount still buffers for the file are pushed first.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off < 0 {
		return nil, syscall.EINVAL
	}
	c, ino := h.n.m.cache, h.n.StableAttr().Ino
	var wgen uint64
	if c != nil {
		// The blocks hold this mount's writes, pushed or not.
		if k, ok := c.read(ino, dest, off); ok {
			h.mu.Lock()
			h.ra.next = off + int64(len(dest))
			h.mu.Unlock()
			return fuse.ReadResultData(dest[:k]), 0
		}
		// Taken before the push below: a write after it makes the
		// cache refuse what this read fetches.
		wgen = c.generation(ino)
	}
	cctx, cancel := h.n.m.call(ctx)
	defer cancel()
	if err := h.n.flushDirty(cctx); err != nil {
		return nil, errno(err)
	}
	gen := h.n.generation()
	h.mu.Lock()
	data, ok := h.ra.get(off, len(dest), gen)
	sequential := off == h.ra.next
	h.ra.next = off + int64(len(dest))
	h.mu.Unlock()
	if ok {
		return fuse.ReadResultData(data), 0
	}
	if !sequential || h.n.m.cfg.ReadAhead <= len(dest) {
		if c != nil {
			return h.fetchBlocks(cctx, dest, off, wgen)
		}
		return h.fetch(cctx, dest, off, false, gen, wgen)
	}
	h.fetching.Lock()
	defer h.fetching.Unlock()
	h.mu.Lock()
	data, ok = h.ra.get(off, len(dest), gen)
	h.mu.Unlock()
	if ok {
		return fuse.ReadResultData(data), 0
	}
	return h.fetch(cctx, dest, off, true, gen, wgen)
}

// fetchBlocks reads the cache blocks covering a read from the cluster,
// keeps them in the block cache and answers the read from them: a random
// reader's later reads nearby then hit the cache.
func (h *handle) fetchBlocks(ctx context.Context, dest []byte, off int64, wgen uint64) (fuse.ReadResult, syscall.Errno) {
	lo := off &^ (cacheBlockSize - 1)
	hi := (off + int64(len(dest)) + cacheBlockSize - 1) &^ (cacheBlockSize - 1)
	buf := make([]byte, hi-lo)
	k, err := h.f.ReadAt(ctx, buf, lo)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, errno(err)
	}
	h.n.m.cache.fill(h.n.StableAttr().Ino, wgen, lo, buf[:k], k < len(buf))
	start := int(off - lo)
	if start >= k {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(buf[start:min(k, start+len(dest))]), 0
}

// fetch reads from the cluster, widening a sequential read to ReadAhead.
func (h *handle) fetch(ctx context.Context, dest []byte, off int64, sequential bool, gen, wgen uint64) (fuse.ReadResult, syscall.Errno) {
	lo, want := off, len(dest)
	if ra := h.n.m.cfg.ReadAhead; sequential && ra > want {
		// Up to the end the file had at open and a byte more, to see
		// it: a 4 KiB file's read needs no 4 MiB buffer.
		want = int(min(int64(ra), max(int64(want), h.size-off+1)))
	}
	c := h.n.m.cache
	if c != nil && sequential {
		// Whole cache blocks, so that the block cache keeps all of it.
		lo = off &^ (cacheBlockSize - 1)
		want = int((off + int64(want) - lo + cacheBlockSize - 1) &^ (cacheBlockSize - 1))
	}
	buf := dest
	if lo != off || want > len(dest) {
		buf = make([]byte, want)
	}
	k, err := h.f.ReadAt(ctx, buf, lo)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, errno(err)
	}
	if c != nil {
		c.fill(h.n.StableAttr().Ino, wgen, lo, buf[:k], k < want)
	}
	if len(buf) > len(dest) || lo != off {
		h.mu.Lock()
		h.ra = window{off: lo, data: buf[:k], eof: k < want, gen: gen, next: h.ra.next}
		h.mu.Unlock()
	}
	start := int(off - lo)
	if start >= k {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(buf[start:min(k, start+len(dest))]), 0
}

// flushDirty pushes buffered writes of the node, if there are any.
func (n *node) flushDirty(ctx context.Context) error {
	for _, h := range n.writers() {
		if h.wb.hasDirty() {
			return n.flushAll(ctx)
		}
	}
	return nil
}

var _ = (gofs.FileWriter)((*handle)(nil))

// Write buffers data (write-behind) or writes it through.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if off < 0 {
		return 0, syscall.EINVAL
	}
	h.n.m.lists.changed()
	h.n.bump()
	h.n.written.Store(true)
	if c := h.n.m.cache; c != nil {
		c.write(h.n.StableAttr().Ino, data, off)
	}
	if h.wb != nil {
		if err := h.wb.write(data, off); err != nil {
			return 0, errno(err)
		}
		return uint32(len(data)), 0
	}
	cctx, cancel := h.n.m.mutation(ctx)
	defer cancel()
	k, err := h.f.WriteAt(cctx, data, off)
	if err != nil {
		return uint32(k), errno(err)
	}
	return uint32(k), 0
}

var _ = (gofs.FileFlusher)((*handle)(nil))

// Flush runs at every close(2): buffered writes are pushed and any error
// of theirs is returned to close.
//
// With the kernel's write-back cache the kernel has sent every dirty page
// of the file before Flush, on whichever open handle it chose, so every
// handle's buffer is pushed; the cluster's version of the file is then
// recorded as the one the kernel caches (see writeback.go).
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	n := h.n
	cctx, cancel := n.m.mutation(ctx)
	defer cancel()
	if !n.m.writeback() {
		if h.wb == nil {
			return 0
		}
		return errno(h.wb.flush(cctx))
	}
	if err := n.flushAll(cctx); err != nil {
		return errno(err)
	}
	if err := h.flushErr(cctx); err != nil {
		return errno(err)
	}
	if n.written.Swap(false) {
		fi, err := n.m.b.Stat(cctx, chunkfs.Root, n.path())
		if err != nil {
			n.written.Store(true)
			return errno(err)
		}
		st := n.StableAttr()
		n.m.files.wrote(st.Ino, st.Gen, versionOf(fi))
		if n.m.cache != nil {
			n.m.cache.pushed(st.Ino, versionOf(fi))
		}
	}
	return 0
}

// flushErr returns the first push error of h's own buffer (flushAll
// reports the first of all handles only).
func (h *handle) flushErr(ctx context.Context) error {
	if h.wb == nil {
		return nil
	}
	return h.wb.flush(ctx)
}

var _ = (gofs.FileFsyncer)((*handle)(nil))

// Fsync pushes buffered writes and makes every replica sync them.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	cctx, cancel := h.n.m.mutation(ctx)
	defer cancel()
	if h.n.m.writeback() {
		// The kernel sent the dirty pages on any of the file's handles.
		if err := h.n.flushAll(cctx); err != nil {
			return errno(err)
		}
	}
	if h.wb != nil {
		if err := h.wb.flush(cctx); err != nil {
			return errno(err)
		}
	}
	return errno(h.f.Sync(cctx))
}

var _ = (gofs.FileReleaser)((*handle)(nil))

// Release runs when the last descriptor of the open file is closed. The
// kernel ignores its result, so a failure to push is logged; close(2) has
// already reported it through Flush.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	if h.write || h.n.hidden.Load() != nil {
		h.n.m.lists.changed() // a push, or the hidden name's removal, follows
	}
	h.releaseLocks()
	cctx, cancel := h.n.m.call(context.Background())
	defer cancel()
	if h.counted {
		// First: an open that follows the close must not take this
		// handle for one still open (the file's client close below can
		// take a while).
		st := h.n.StableAttr()
		h.n.m.files.closed(st.Ino)
	}
	var err error
	if h.wb != nil {
		err = h.wb.flush(cctx)
	}
	if cerr := h.f.Close(); err == nil {
		err = cerr
	}
	h.n.mu.Lock()
	delete(h.n.handles, h)
	last := len(h.n.handles) == 0
	if last && h.n.hidden.Load() == nil {
		h.n.m.names.closed(h.n) // a hidden node: once its name is gone
	}
	h.n.mu.Unlock()
	if !h.counted && h.write {
		h.n.remember(cctx)
	}
	if c := h.n.m.cache; c != nil {
		c.closed(h.n.StableAttr().Ino, h.write)
	}
	if last {
		h.n.unhide(cctx)
	}
	if err != nil {
		h.n.m.log.Warn("release", "path", h.n.path(), "err", err)
	}
	return errno(err)
}

// remember records the version of the file after this mount wrote it: the
// page cache holds exactly that, so the next open may keep it.
func (n *node) remember(ctx context.Context) {
	fi, err := n.m.b.Stat(ctx, chunkfs.Root, n.path())
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		n.cached = version{}
		return
	}
	n.cached = versionOf(fi)
	if n.m.cache != nil {
		n.m.cache.pushed(n.StableAttr().Ino, n.cached)
	}
}

var _ = (gofs.FileGetattrer)((*handle)(nil))

// Getattr of an open file is the node's.
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.n.Getattr(ctx, nil, out)
}
