package fusefs

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chunkfs/chunkfs"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// handle is one open file: the cluster file, how its writes reach the
// cluster (write-through or write-behind, chosen by the mount) and its
// read-ahead window.
type handle struct {
	n     *node
	f     File
	name  string // the path f names (guarded by n.mu and names.io held exclusively)
	write bool   // opened for writing
	size  int64  // the file's length on the cluster at open: read-ahead stops there
	w     writer

	// closed is set at the first close(2) of a descriptor of this open
	// file (Flush): its release may follow at any moment.
	closed atomic.Bool

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
	if err := n.m.closer.wait(cctx, n); err != nil {
		return nil, 0, errno(err)
	}
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
	fuseFlags, e := n.m.kernel.open(n, fi, write, false)
	if e != 0 {
		f.Close()
		return nil, 0, e
	}
	h := n.newHandle(f, p, write)
	h.size = fi.Length
	locked = false
	n.m.names.io.RUnlock()
	n.m.data.opened(n.StableAttr().Ino, versionOf(fi), write)
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
	cctx, cancel, gen := n.m.mutationAt(ctx)
	defer cancel()
	excl, trunc := flags&syscall.O_EXCL != 0, flags&syscall.O_TRUNC != 0
	n.m.names.io.RLock() // until the handle is counted (see Open)
	defer n.m.names.io.RUnlock()
	p := n.child(name)
	n.m.known.adding(n.path(), name)
	f, fi, parent, err := n.m.b.Create(cctx, callerOf(ctx), p, goPerm(mode), excl, trunc, time.Time{})
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	if pf, ok := f.(pendingFile); ok && flags&syscall.O_APPEND != 0 {
		f = pf.appending(n.m.kernel.placesAppends())
	}
	n.m.noteAttr(n, parent, gen)
	ch := n.entry(ctx, fi, out)
	cn := ch.Operations().(*node)
	fl, _ := n.m.kernel.open(cn, fi, true, true)
	h := cn.newHandle(f, p, true)
	n.m.data.opened(ch.StableAttr().Ino, versionOf(fi), true)
	return ch, h, fl, 0
}

// newHandle counts a handle of f, opened at path p. The names' io is
// held shared.
func (n *node) newHandle(f File, p string, write bool) *handle {
	f = namedFile{File: f, s: n.m.names}
	h := &handle{n: n, f: f, name: p, write: write, w: n.m.newWriter(f, write)}
	n.mu.Lock()
	n.handles[h] = struct{}{}
	if len(n.handles) == 1 {
		n.m.names.opened(n)
	}
	n.mu.Unlock()
	return h
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

// writers returns the writers of the node's open handles.
func (n *node) writers() []writer {
	n.mu.Lock()
	defer n.mu.Unlock()
	ws := make([]writer, 0, len(n.handles))
	for h := range n.handles {
		ws = append(ws, h.w)
	}
	return ws
}

// flushAll pushes the buffered writes of every open handle of the node, so
// that reads, truncations and renames see them.
func (n *node) flushAll(ctx context.Context) error {
	var first error
	for _, w := range n.writers() {
		if err := w.flush(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// dirtyEnd returns the furthest end of the node's buffered writes.
func (n *node) dirtyEnd() int64 {
	var end int64
	for _, w := range n.writers() {
		end = max(end, w.dirtyEnd())
	}
	return end
}

var _ = (gofs.FileReader)((*handle)(nil))

// Read serves a read from the data cache, the handle's window (read
// ahead, or a small file read whole at open) or the cluster. Writes this
// mount still buffers for the file are pushed first.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off < 0 {
		return nil, syscall.EINVAL
	}
	data, ino := h.n.m.data, h.n.StableAttr().Ino
	// The data cache holds this mount's writes, pushed or not.
	if k, ok := data.read(ino, dest, off); ok {
		h.mu.Lock()
		h.ra.next = off + int64(len(dest))
		h.mu.Unlock()
		return fuse.ReadResultData(dest[:k]), 0
	}
	// Taken before the push below: a write after it makes the cache
	// refuse what this read fetches.
	wgen := data.generation(ino)
	cctx, cancel := h.n.m.call(ctx)
	defer cancel()
	if err := h.n.flushDirty(cctx); err != nil {
		return nil, errno(err)
	}
	gen := h.n.generation()
	h.mu.Lock()
	win, ok := h.ra.get(off, len(dest), gen)
	sequential := off == h.ra.next
	h.ra.next = off + int64(len(dest))
	h.mu.Unlock()
	if ok {
		return fuse.ReadResultData(win), 0
	}
	lo, want, ahead := h.n.m.reader.span(h, off, len(dest), sequential)
	if ahead {
		// The kernel's concurrent reads of one stream wait for one
		// window instead of each fetching its own.
		h.fetching.Lock()
		defer h.fetching.Unlock()
		h.mu.Lock()
		win, ok = h.ra.get(off, len(dest), gen)
		h.mu.Unlock()
		if ok {
			return fuse.ReadResultData(win), 0
		}
	}
	return h.fetch(cctx, dest, off, lo, want, ahead, gen, wgen)
}

// fetch answers a read of len(dest) bytes at off by reading [lo, lo+want)
// from the cluster, which the data cache keeps; ahead keeps it as the
// handle's window too.
func (h *handle) fetch(ctx context.Context, dest []byte, off, lo int64, want int, ahead bool, gen, wgen uint64) (fuse.ReadResult, syscall.Errno) {
	buf := dest
	if lo != off || want > len(dest) {
		buf = make([]byte, want)
	}
	k, err := h.f.ReadAt(ctx, buf, lo)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, errno(err)
	}
	h.n.m.data.fill(h.n.StableAttr().Ino, wgen, lo, buf[:k], k < want)
	if ahead && (len(buf) > len(dest) || lo != off) {
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
	for _, w := range n.writers() {
		if w.hasDirty() {
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
	h.n.m.data.write(h.n.StableAttr().Ino, data, off)
	k, err := h.w.write(ctx, data, off)
	return uint32(k), errno(err)
}

var _ = (gofs.FileFlusher)((*handle)(nil))

// Flush runs at every close(2): buffered writes are pushed and any error
// of theirs is returned to close. Whether close waits for the push is the
// closer's (asyncclose.go); which buffers it pushes, and what it records
// of the file's version, the kernel cache's (policy.go).
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	h.closed.Store(true)
	cctx, cancel := h.n.m.fileChange(ctx)
	defer cancel()
	return errno(h.n.m.closer.close(cctx, h))
}

var _ = (gofs.FileFsyncer)((*handle)(nil))

// Fsync pushes buffered writes and makes every replica sync them; it
// first waits for the file's pushes in flight after a close, and returns
// the error of one that failed.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	cctx, cancel := h.n.m.fileChange(ctx)
	defer cancel()
	if err := h.n.m.closer.wait(cctx, h.n); err != nil {
		return errno(err)
	}
	if err := h.n.m.closer.failed(h.n); err != nil {
		return errno(err)
	}
	if err := h.n.m.kernel.push(cctx, h); err != nil {
		return errno(err)
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
	err := h.n.m.closer.wait(cctx, h.n) // the push its close started
	h.n.m.kernel.releasing(h)
	if ferr := h.w.flush(cctx); err == nil {
		err = ferr
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
	h.n.m.kernel.released(cctx, h)
	h.n.m.data.closed(h.n.StableAttr().Ino, h.write)
	if last {
		h.n.unhide(cctx)
	}
	if err != nil {
		h.n.m.log.Warn("release", "path", h.n.path(), "err", err)
	}
	return errno(err)
}

var _ = (gofs.FileGetattrer)((*handle)(nil))

// Getattr of an open file is the node's.
func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.n.Getattr(ctx, nil, out)
}
