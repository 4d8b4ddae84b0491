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
	write bool // opened for writing
	wb    *writeBehind

	mu sync.Mutex // guards ra
	ra window

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
	f, fi, err := n.m.b.Open(cctx, callerOf(ctx), n.path(), write)
	if err != nil {
		return nil, 0, errno(err)
	}
	h := n.newHandle(f, write)
	fuseFlags := n.opened(fi, true)
	if fuseFlags&fuse.FOPEN_KEEP_CACHE == 0 && flags&syscall.O_ACCMODE != syscall.O_WRONLY {
		h.quickRead(cctx, fi)
	}
	return h, fuseFlags, 0
}

var _ = (gofs.NodeCreater)((*node)(nil))

// Create makes and opens a file. mode has the caller's umask applied by
// the kernel, and is used exactly: 0000 stays 0000.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if e := checkName(name); e != 0 {
		return nil, nil, 0, e
	}
	cctx, cancel := n.m.call(ctx)
	defer cancel()
	excl, trunc := flags&syscall.O_EXCL != 0, flags&syscall.O_TRUNC != 0
	f, fi, err := n.m.b.Create(cctx, callerOf(ctx), n.child(name), goPerm(mode), excl, trunc)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	ch := n.entry(ctx, fi, out)
	cn := ch.Operations().(*node)
	h := cn.newHandle(f, true)
	return ch, h, cn.opened(fi, false), 0
}

func (n *node) newHandle(f File, write bool) *handle {
	h := &handle{n: n, f: f, write: write}
	if write && n.m.cfg.WriteBehind > 0 {
		h.wb = newWriteBehind(f, n.m.cfg.WriteBehind, n.m.cfg.FlushSize, n.m.cfg.OpTimeout)
	}
	n.mu.Lock()
	n.handles[h] = struct{}{}
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
		return h.fetch(cctx, dest, off, false, gen)
	}
	h.fetching.Lock()
	defer h.fetching.Unlock()
	h.mu.Lock()
	data, ok = h.ra.get(off, len(dest), gen)
	h.mu.Unlock()
	if ok {
		return fuse.ReadResultData(data), 0
	}
	return h.fetch(cctx, dest, off, true, gen)
}

// fetch reads from the cluster, widening a sequential read to ReadAhead.
func (h *handle) fetch(ctx context.Context, dest []byte, off int64, sequential bool, gen uint64) (fuse.ReadResult, syscall.Errno) {
	want := len(dest)
	if ra := h.n.m.cfg.ReadAhead; sequential && ra > want {
		want = ra
	}
	buf := dest
	if want > len(dest) {
		buf = make([]byte, want)
	}
	k, err := h.f.ReadAt(ctx, buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, errno(err)
	}
	if want > len(dest) {
		h.mu.Lock()
		h.ra = window{off: off, data: buf[:k], eof: k < want, gen: gen, next: h.ra.next}
		h.mu.Unlock()
	}
	return fuse.ReadResultData(buf[:min(k, len(dest))]), 0
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
	h.n.bump()
	if h.wb != nil {
		if err := h.wb.write(data, off); err != nil {
			return 0, errno(err)
		}
		return uint32(len(data)), 0
	}
	cctx, cancel := h.n.m.call(ctx)
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
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	if h.wb == nil {
		return 0
	}
	cctx, cancel := h.n.m.call(ctx)
	defer cancel()
	return errno(h.wb.flush(cctx))
}

var _ = (gofs.FileFsyncer)((*handle)(nil))

// Fsync pushes buffered writes and makes every replica sync them.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	cctx, cancel := h.n.m.call(ctx)
	defer cancel()
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
	cctx, cancel := h.n.m.call(context.Background())
	defer cancel()
	var err error
	if h.wb != nil {
		err = h.wb.flush(cctx)
	}
	if cerr := h.f.Close(); err == nil {
		err = cerr
	}
	h.n.mu.Lock()
	delete(h.n.handles, h)
	h.n.mu.Unlock()
	if h.write {
		h.n.remember(cctx)
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
}

var _ = (gofs.FileGetattrer)((*handle)(nil))

// Getattr of an open file is the node's.
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.n.Getattr(ctx, nil, out)
}
