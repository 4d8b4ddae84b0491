package client

import (
	"context"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/reqid"
)

// File is an open chunkfs file. It implements io.Reader, io.ReaderAt,
// io.Writer, io.WriterAt, io.Seeker and io.Closer. Its methods use the
// context the file was opened with.
//
// Writes are buffered (Config.WriteBuffer) and sent at chunk boundaries
// and when the buffer fills, in the background while the next buffer fills
// (up to Config.WriteBehind bytes, at least two flushes, in flight: they
// push their data at once and apply it in order), and on Sync, Close, Seek, Stat,
// Truncate and reads, which wait for them. An error sending buffered data is returned by
// the next Write (or whichever call waits for that flush), and again by Sync
// and Close: it is never lost. Data is
// acknowledged (on every replica) once Sync or Close returns nil.
//
// A File is safe for concurrent use; ReadAt calls run in parallel.
type File struct {
	c    *Client
	ctx  context.Context
	path string
	flag int
	dir  bool

	mu      sync.Mutex // guards the fields below
	off     int64      // offset of the next Read or Write
	wbuf    []byte     // buffered data, to be written at wbufOff
	wbufOff int64
	dirty   map[int64]struct{} // chunks written since the last Sync
	werr    error              // first failed flush; returned by Sync and Close
	lastIdx int64              // guess of the last chunk, for Append; -1: unknown
	rbuf    []byte             // read-ahead: file data at rbufOff
	rbufOff int64
	flights []*flight // the flushes in flight, oldest first
	spares  [][]byte  // free write buffers
	mtime   int64     // the mtime the next flush's commit sets (Unix ns; 0: now)
	closed  bool
}

// readAhead is how much a small Read fetches at once.
const readAhead = 4 << 20

// Create creates or truncates file path (mode 0666 less Config.Umask) and
// opens it for reading and writing.
func (c *Client) Create(ctx context.Context, path string) (*File, error) {
	return c.OpenFile(ctx, path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open opens path for reading.
func (c *Client) Open(ctx context.Context, path string) (*File, error) {
	return c.OpenFile(ctx, path, os.O_RDONLY, 0)
}

// OpenFile opens path with flag (os.O_RDONLY, os.O_WRONLY, os.O_RDWR, and
// os.O_CREATE, os.O_EXCL, os.O_TRUNC, os.O_APPEND) and, when it creates the
// file, permission bits perm less Config.Umask.
func (c *Client) OpenFile(ctx context.Context, path string, flag int, perm fs.FileMode) (*File, error) {
	f, _, err := c.OpenFileInfo(ctx, path, flag, perm)
	return f, err
}

// CreateOptions are what a create sets beyond os.OpenFile's arguments.
type CreateOptions struct {
	// Replication is how many replicas the new file's chunks keep, from
	// its first chunk on; 0 takes its directory's. An existing file keeps
	// its own.
	Replication int
	// Time is a new file's atime and mtime (as a FUSE mount answered an
	// asynchronous create); zero takes the master's clock. An existing
	// file keeps its own.
	Time time.Time
}

// unixNano is t in Unix ns, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// OpenFileWith is OpenFile that creates a new file with o.
func (c *Client) OpenFileWith(ctx context.Context, path string, flag int, perm fs.FileMode, o CreateOptions) (*File, error) {
	if o.Replication < 0 || o.Replication > chunkfs.MaxReplication {
		return nil, chunkfs.E("create", path, chunkfs.KindInvalid, "replication must be between 1 and 16")
	}
	f, _, _, err := c.openFile(ctx, path, flag, perm, o)
	return f, err
}

// OpenFileInfo is OpenFile that also returns the file's attributes as the
// open learned them from the master (its create, or its stat), before any
// truncation it made: a caller that needs both makes one call.
func (c *Client) OpenFileInfo(ctx context.Context, path string, flag int, perm fs.FileMode) (*File, *chunkfs.FileInfo, error) {
	f, fi, _, err := c.openFile(ctx, path, flag, perm, CreateOptions{})
	return f, fi, err
}

// OpenFileParent is OpenFileInfo that also returns, when flag holds
// O_CREATE, the attributes of path's parent directory just after the
// create, as the master saw them (nil when it did not say, or without
// O_CREATE), as RemoveParent does: the FUSE mount answers the kernel's
// next look at the directory with them. A file it makes gets o.Time.
func (c *Client) OpenFileParent(ctx context.Context, path string, flag int, perm fs.FileMode, o CreateOptions) (f *File, fi, parent *chunkfs.FileInfo, err error) {
	return c.openFile(ctx, path, flag, perm, CreateOptions{Time: o.Time})
}

func (c *Client) openFile(ctx context.Context, path string, flag int, perm fs.FileMode, o CreateOptions) (*File, *chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	path, err := checkPath("open", path)
	if err != nil {
		return nil, nil, nil, err
	}
	fctx := ctx             // the file's, for its I/O: each operation gets a request ID of its own (opCtx)
	ctx = reqid.Ensure(ctx) // the open's
	var fi, parent *chunkfs.FileInfo
	if flag&os.O_CREATE != 0 {
		fi, parent, err = c.create(ctx, path, flag, perm, o)
	} else {
		fi, err = c.Stat(ctx, path)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if flag&os.O_CREATE == 0 {
		if err := c.checkAccess(path, fi, flag); err != nil {
			return nil, nil, nil, err
		}
	}
	f := c.newFile(fctx, path, flag, fi)
	if f.dir && f.writable() {
		return nil, nil, nil, chunkfs.E("open", path, chunkfs.KindIsDir, "cannot open a directory for writing")
	}
	if flag&os.O_TRUNC != 0 && flag&os.O_CREATE == 0 && f.writable() && fi.Length > 0 {
		if err := c.Truncate(ctx, path, 0); err != nil {
			return nil, nil, nil, err
		}
	}
	return f, fi, parent, nil
}

// OpenKnown opens path for I/O (flag: os.O_RDONLY, os.O_WRONLY or
// os.O_RDWR, nothing else) with no call to the master, trusting fi, which
// the caller has just learned of the file from the master (by
// OpenFileInfo or Stat), and deciding no access: whoever learned fi
// decided it. The FUSE mount uses it to open the I/O of a descriptor whose
// create or open it has just made as the calling user.
func (c *Client) OpenKnown(ctx context.Context, path string, flag int, fi *chunkfs.FileInfo) (*File, error) {
	path, err := checkPath("open", path)
	if err != nil {
		return nil, err
	}
	if flag&^(os.O_WRONLY|os.O_RDWR) != 0 || fi == nil {
		return nil, chunkfs.E("open", path, chunkfs.KindInvalid, "OpenKnown takes only an access mode and the file's attributes")
	}
	f := c.newFile(ctx, path, flag, fi)
	if f.dir && f.writable() {
		return nil, chunkfs.E("open", path, chunkfs.KindIsDir, "cannot open a directory for writing")
	}
	return f, nil
}

func (c *Client) newFile(ctx context.Context, path string, flag int, fi *chunkfs.FileInfo) *File {
	if !fi.IsDir() {
		c.locs.validate(path, fi)
	}
	return &File{c: c, ctx: ctx, path: path, flag: flag, dir: fi.IsDir(), lastIdx: -1, dirty: make(map[int64]struct{})}
}

// checkAccess decides at open, as open(2) does, whether the caller may
// read (O_RDONLY) or write (O_WRONLY, O_RDWR) the file fi describes, so
// that a denied open says "open PATH: permission denied" rather than
// failing at the first read or write. O_RDWR is checked for write only:
// the mount opens a write-only descriptor O_RDWR, and its reads, like
// every operation, are checked again by the master.
func (c *Client) checkAccess(path string, fi *chunkfs.FileInfo, flag int) error {
	want := chunkfs.AccessRead
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		want = chunkfs.AccessWrite
	}
	if !c.cfg.Caller.Allows(fi.FileMode, fi.UID, fi.GID, want) {
		return chunkfs.E("open", path, chunkfs.KindPermission, "")
	}
	return nil
}

// create makes or opens path for writing; it returns the file's
// attributes and its parent directory's just after, or nil for the
// parent when the master did not say.
func (c *Client) create(ctx context.Context, path string, flag int, perm fs.FileMode, o CreateOptions) (fi, parent *chunkfs.FileInfo, err error) {
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return nil, nil, chunkfs.E("create", path, chunkfs.KindInvalid, "O_CREATE needs O_WRONLY or O_RDWR")
	}
	fi, parent, err = c.createCall(ctx, createSpec{
		path: path, mode: uint32(perm & modeBits &^ c.cfg.Umask),
		exclusive: flag&os.O_EXCL != 0, truncate: flag&os.O_TRUNC != 0, replication: uint32(o.Replication),
		firstChunk: true, // opened to write: its chunk 0 comes in the create's log entry
		time:       unixNano(o.Time),
	})
	if err != nil {
		return nil, nil, wrapOp("create", path, err)
	}
	if flag&os.O_TRUNC != 0 {
		c.locs.drop(path)
		c.leases.dropPath(path)
	}
	if fi.IsDir() {
		return nil, nil, chunkfs.E("create", path, chunkfs.KindIsDir, "cannot open a directory for writing")
	}
	return fi, parent, nil
}

// Name returns the file's path.
func (f *File) Name() string { return f.path }

func (f *File) writable() bool { return f.flag&(os.O_WRONLY|os.O_RDWR) != 0 }
func (f *File) readable() bool { return f.flag&os.O_WRONLY == 0 }

// checkLocked returns the error an operation on f gets before it starts.
func (f *File) checkLocked(op string, write bool) error {
	switch {
	case f.closed:
		return chunkfs.E(op, f.path, chunkfs.KindInvalid, "file already closed")
	case f.dir:
		return chunkfs.E(op, f.path, chunkfs.KindIsDir, "is a directory")
	case write && !f.writable():
		return chunkfs.E(op, f.path, chunkfs.KindPermission, "file not open for writing")
	case !write && !f.readable():
		return chunkfs.E(op, f.path, chunkfs.KindPermission, "file not open for reading")
	}
	return nil
}

// opCtx is the context of one operation on f (a read, a flush, a sync):
// the file's, with a request ID of its own unless the file's carries one.
func (f *File) opCtx() context.Context { return reqid.Ensure(f.ctx) }

// Read reads up to len(p) bytes at the file offset; io.EOF at the end.
func (f *File) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked("read", false); err != nil {
		return 0, err
	}
	if err := f.flushLocked(); err != nil {
		return 0, err
	}
	if len(p) >= readAhead {
		n, err := f.c.readAt(f.opCtx(), f.path, p, f.off)
		f.off += int64(n)
		if n > 0 && err == io.EOF {
			err = nil
		}
		return n, err
	}
	if f.off < f.rbufOff || f.off >= f.rbufOff+int64(len(f.rbuf)) {
		if err := f.fillLocked(); err != nil {
			return 0, err
		}
	}
	n := copy(p, f.rbuf[f.off-f.rbufOff:])
	f.off += int64(n)
	return n, nil
}

// fillLocked reads ahead from the file offset into rbuf. It returns io.EOF
// when there is nothing at the offset.
func (f *File) fillLocked() error {
	if cap(f.rbuf) < readAhead {
		f.rbuf = make([]byte, readAhead)
	}
	buf := f.rbuf[:readAhead]
	n, err := f.c.readAt(f.opCtx(), f.path, buf, f.off)
	f.rbuf, f.rbufOff = buf[:n], f.off
	if n > 0 {
		return nil
	}
	return err
}

// ReadAt reads len(p) bytes at off, as io.ReaderAt specifies.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	err := f.checkLocked("read", false)
	if err == nil {
		err = f.flushLocked()
	}
	f.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return f.c.readAt(f.opCtx(), f.path, p, off)
}

// Write writes p at the file offset (the end of the file with O_APPEND).
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked("write", true); err != nil {
		return 0, err
	}
	if f.flag&os.O_APPEND != 0 && len(f.wbuf) == 0 {
		fi, err := f.c.Stat(f.opCtx(), f.path)
		if err != nil {
			return 0, err
		}
		f.off = fi.Length
	}
	n, err := f.bufferLocked(p, f.off)
	f.off += int64(n)
	return n, err
}

// WriteAt writes p at off, as io.WriterAt specifies. It does not use or
// move the file offset.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, chunkfs.E("write", f.path, chunkfs.KindInvalid, "negative offset")
	}
	if f.flag&os.O_APPEND != 0 {
		return 0, chunkfs.E("write", f.path, chunkfs.KindInvalid, "WriteAt on a file opened with O_APPEND")
	}
	return f.bufferLocked(p, off)
}

// bufferLocked adds p at off to the write buffer, flushing at chunk
// boundaries and when the buffer is full.
func (f *File) bufferLocked(p []byte, off int64) (int, error) {
	if err := f.reapLocked(); err != nil {
		return 0, err
	}
	if len(f.wbuf) > 0 && off != f.wbufOff+int64(len(f.wbuf)) {
		if err := f.flushLocked(); err != nil {
			return 0, err
		}
	}
	limit := f.c.cfg.WriteBuffer
	if limit == 0 {
		limit = maxMutation // write-through: each Write goes out whole (split at chunks)
	}
	cs := f.c.chunkSize
	written := 0
	for len(p) > written {
		if len(f.wbuf) == 0 {
			f.wbufOff = off + int64(written)
		}
		end := f.wbufOff + int64(len(f.wbuf))
		room := int(min(int64(limit-len(f.wbuf)), cs-end%cs))
		k := min(room, len(p)-written)
		f.wbuf = append(f.wbuf, p[written:written+k]...)
		written += k
		switch {
		case f.c.cfg.WriteBuffer == 0:
			if err := f.flushLocked(); err != nil { // write-through
				return written, err
			}
		case len(f.wbuf) >= limit || (end+int64(k))%cs == 0:
			if err := f.startFlushLocked(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// flushLocked sends the write buffer to the cluster and waits until it and
// any flush in flight are applied.
func (f *File) flushLocked() error {
	if err := f.startFlushLocked(); err != nil {
		return err
	}
	return f.waitLocked()
}

// maxFlights is how many flushes a file may have in flight at once:
// Config.WriteBehind / Config.WriteBuffer, at least two (so the next
// flush's push overlaps the previous one's Write RPC and CommitLength and
// the NIC stays busy across flushes) and at most 64.
func (c *Client) maxFlights() int {
	if c.cfg.WriteBuffer == 0 {
		return 2
	}
	return min(max(c.cfg.WriteBehind/c.cfg.WriteBuffer, 2), 64)
}

// startFlushLocked starts sending the write buffer in the background, after
// waiting for the oldest flush if maxFlights are in flight; a stream of
// writes fills one buffer while the others are on the wire. The new flush
// applies its data only after the previous one has finished, and not at
// all if that one failed.
func (f *File) startFlushLocked() error {
	for len(f.flights) >= f.c.maxFlights() {
		if err := f.waitOldestLocked(); err != nil {
			return err
		}
	}
	if len(f.wbuf) == 0 {
		return nil
	}
	off, data := f.wbufOff, f.wbuf
	f.wbuf = nil
	if k := len(f.spares); k > 0 {
		f.wbuf, f.spares = f.spares[k-1][:0], f.spares[:k-1]
	}
	f.rbuf = f.rbuf[:0]
	for idx := off / f.c.chunkSize; idx*f.c.chunkSize < off+int64(len(data)); idx++ {
		f.dirty[idx] = struct{}{}
	}
	var prev *flight
	if k := len(f.flights); k > 0 {
		prev = f.flights[k-1]
	}
	fl := &flight{done: make(chan struct{}), buf: data}
	f.flights = append(f.flights, fl)
	mtime := f.mtime
	f.mtime = 0
	go func() {
		fl.err = f.c.writeAt(f.opCtx(), f.path, data, off, prev, mtime)
		close(fl.done)
	}()
	return nil
}

// ModTimeAtCommit has the next flush of data written through f also set
// the file's mtime to t, in the log entry that commits the data's length,
// rather than in one of its own, as Chtimes(path, t) just after the
// write would (and with its rule: only the file's owner or the superuser
// chooses a time). The FUSE mount uses it for the mtime its kernel's
// write-back cache sends just before the data it still buffers. A zero t
// withdraws a time no flush has taken yet; it reports whether there was
// one (the caller then sets the time itself).
func (f *File) ModTimeAtCommit(t time.Time) (pending bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pending = f.mtime != 0
	f.mtime = 0
	if !t.IsZero() {
		f.mtime = t.UnixNano()
	}
	return pending
}

// waitLocked waits for every flush in flight and returns the first error.
func (f *File) waitLocked() error {
	var first error
	for len(f.flights) > 0 {
		if err := f.waitOldestLocked(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// reapLocked collects the flushes that have finished, oldest first, without
// waiting, so that a failure surfaces on the next Write even while a later
// flush is still in flight.
func (f *File) reapLocked() error {
	for len(f.flights) > 0 {
		select {
		case <-f.flights[0].done:
		default:
			return nil
		}
		if err := f.waitOldestLocked(); err != nil {
			return err
		}
	}
	return nil
}

// waitOldestLocked waits for the oldest flush in flight and returns its
// error, which also becomes the file's sticky error if it is the first.
func (f *File) waitOldestLocked() error {
	fl := f.flights[0]
	<-fl.done
	f.flights = f.flights[1:]
	f.spares = append(f.spares, fl.buf[:0])
	if fl.err != nil {
		if f.werr == nil {
			f.werr = fl.err
		}
		return fl.err
	}
	return nil
}

// flight is a flush running in the background.
type flight struct {
	done chan struct{} // closed when the write returns
	buf  []byte        // the data; reused as a later buffer
	err  error         // the write's result, set before done is closed
}

// wait waits for fl (nil: nothing to wait for) to finish and returns its
// error, or the context's if it ends first.
func (fl *flight) wait(ctx context.Context) error {
	if fl == nil {
		return nil
	}
	select {
	case <-fl.done:
		return fl.err
	case <-ctx.Done():
		return &chunkfs.Error{Op: "write", Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
	}
}

// Sync sends buffered data and makes every replica of the chunks written
// since the last Sync flush them to stable storage.
func (f *File) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked("sync", true); err != nil {
		return err
	}
	return f.syncLocked()
}

func (f *File) syncLocked() error {
	if err := f.flushLocked(); err != nil {
		return err
	}
	if f.werr != nil {
		return f.werr
	}
	ctx := f.opCtx()
	for idx := range f.dirty {
		if err := f.c.syncChunk(ctx, f.path, idx); err != nil {
			return wrapOp("sync", f.path, err)
		}
		delete(f.dirty, idx)
	}
	return nil
}

// Seek sets the file offset, as io.Seeker specifies.
func (f *File) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, chunkfs.E("seek", f.path, chunkfs.KindInvalid, "file already closed")
	}
	if err := f.flushLocked(); err != nil {
		return f.off, err
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = f.off
	case io.SeekEnd:
		fi, err := f.c.Stat(f.opCtx(), f.path)
		if err != nil {
			return f.off, err
		}
		base = fi.Length
	default:
		return f.off, chunkfs.E("seek", f.path, chunkfs.KindInvalid, "bad whence")
	}
	if base+offset < 0 {
		return f.off, chunkfs.E("seek", f.path, chunkfs.KindInvalid, "negative offset")
	}
	f.off = base + offset
	return f.off, nil
}

// Stat returns the file's metadata, after sending buffered data.
func (f *File) Stat() (*chunkfs.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed && !f.dir {
		if err := f.flushLocked(); err != nil {
			return nil, err
		}
	}
	return f.c.Stat(f.opCtx(), f.path)
}

// Truncate sets the file's length.
func (f *File) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkLocked("truncate", true); err != nil {
		return err
	}
	if err := f.flushLocked(); err != nil {
		return err
	}
	f.lastIdx = -1
	f.rbuf = f.rbuf[:0]
	return f.c.Truncate(f.opCtx(), f.path, size)
}

// CloseUnsynced sends buffered data and releases the file, as Close, but
// leaves the replicas to write it to disk in their own time: the data is
// on every replica once it returns nil, durable there only after their
// next sync. A local file system's close(2) promises as much; the FUSE
// mount's release uses it when told not to sync at close.
func (f *File) CloseUnsynced() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return chunkfs.E("close", f.path, chunkfs.KindInvalid, "file already closed")
	}
	var err error
	if f.writable() && !f.dir {
		if err = f.flushLocked(); err == nil {
			err = f.werr
		}
	}
	f.closed = true
	f.wbuf, f.spares = nil, nil
	return err
}

// Close sends buffered data, makes it durable on every replica when the file
// was written, and releases the file. It returns any write error not yet
// reported by Sync.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return chunkfs.E("close", f.path, chunkfs.KindInvalid, "file already closed")
	}
	var err error
	if f.writable() && !f.dir {
		err = f.syncLocked()
	}
	f.closed = true
	f.wbuf, f.spares = nil, nil
	return err
}
