package fusefs

import (
	"context"
	"io/fs"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/locks"
)

// creator is the Backend the mount calls, chosen at mount time by what
// create(2) waits for: the master's durable create of the file
// (syncCreate, the default), or nothing (asyncCreate, Config.AsyncCreate),
// as a CephFS client holding a directory's create capability answers
// create before its MDS has logged it.
type creator interface {
	Backend
	// settle waits until no create at p or under it is in flight.
	settle(ctx context.Context, p string) error
	// drain waits for every create in flight (unmount).
	drain()
	// listNames lists the names in directory dir as the master will
	// have them once the creates in flight are done, without waiting
	// for them (knowndirs.go).
	listNames(ctx context.Context, c chunkfs.Caller, dir string) ([]string, error)
}

// newCreator chooses the creator of cfg. gone drops the kernel's entry of
// a path whose create the master refused; stale drops the kernel's
// attributes of a path whose create opened another mount's file.
func newCreator(b Backend, cfg Config, clk clock.Clock, log *slog.Logger, gone, stale func(p string)) creator {
	if cfg.AsyncCreate == 0 {
		return syncCreate{b}
	}
	return &asyncCreate{Backend: b, clk: clk, log: log, timeout: cfg.OpTimeout, attrTimeout: cfg.AttrTimeout, gone: gone, stale: stale,
		slots: make(chan struct{}, cfg.AsyncCreate), pending: map[string]*pendingCreate{},
		toLocal: map[uint64]uint64{}, toCluster: map[uint64]uint64{}}
}

// syncCreate is the cluster's Backend as it is.
type syncCreate struct{ Backend }

func (syncCreate) settle(context.Context, string) error { return nil }
func (syncCreate) drain()                               {}

func (s syncCreate) listNames(ctx context.Context, c chunkfs.Caller, dir string) ([]string, error) {
	return namesIn(ctx, s.Backend, c, dir, nil)
}

// namesIn returns the names b lists in dir, and then those of more.
func namesIn(ctx context.Context, b Backend, c chunkfs.Caller, dir string, more []string) ([]string, error) {
	fis, err := b.ReadDir(ctx, c, dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(fis)+len(more))
	for _, fi := range fis {
		names = append(names, fi.FileName)
	}
	return append(names, more...), nil
}

// localInoBase is where the inode numbers this mount gives the files it
// creates asynchronously start: far above any the master assigns (it
// counts up from 2) and below go-fuse's own automatic ones (from 1<<63).
const localInoBase = 1 << 62

// asyncCreate answers a create at once, with attributes made by the
// mount under an inode number of its own (localInoBase), and sends the
// create to the master in the background: up to Config.AsyncCreate in
// flight, which the client library gathers into batches (one log entry
// and one fsync for each). The file's I/O waits for its create; so does
// every call naming its path or a directory above it, except a stat,
// which answers the mount's attributes. A create the master refuses is
// logged, its name is dropped from the kernel's cache, and the file's
// I/O fails with EIO, so that the close or fsync that pushes its data
// returns it.
//
// The file keeps this mount's number until unmount: every answer of the
// cluster about the file has its number replaced (toLocal), and a lock on
// it is asked of the master under the cluster's number (toCluster). The
// pair is not dropped when the kernel forgets the file: go-fuse may call
// OnForget spuriously (its tree's RmChild and AddChild do), and a node the
// kernel still holds would then change number; the pairs cost some 40
// bytes a file for the mount's life.
type asyncCreate struct {
	Backend
	clk     clock.Clock
	log     *slog.Logger
	timeout time.Duration // Config.OpTimeout, of each create
	// attrTimeout is Config.AttrTimeout: how long a directory's
	// attributes answered by Stat describe it for Create (dir).
	attrTimeout time.Duration
	gone        func(p string)
	stale       func(p string)
	slots       chan struct{} // one token per create in flight

	mu        sync.Mutex                // guards pending, toLocal, toCluster and next
	pending   map[string]*pendingCreate // by path: the creates in flight
	toLocal   map[uint64]uint64         // the cluster's inode number → this mount's
	toCluster map[uint64]uint64         // the reverse
	next      uint64                    // the last local number given
	dir       seenDir                   // the directory Stat last answered
	all       sync.WaitGroup            // every create in flight
}

// seenDir is a directory's attributes as Stat answered them at a time.
type seenDir struct {
	path string
	fi   chunkfs.FileInfo
	at   time.Time
}

// pendingCreate is one create in flight.
type pendingCreate struct {
	path string           // renames of it or above it wait for the create
	fi   chunkfs.FileInfo // the attributes answered until it is done
	done chan struct{}    // closed when the master has answered
	f    File             // the file opened, once done without err
	err  error            // why the master refused it, once done
	// base is the length of the file another mount made first, which the
	// plain create opened without truncating, once done: the kernel
	// figured the offsets of appends from the empty file answered.
	base int64

	mu       sync.Mutex // guards isOpen, mtime and appended
	isOpen   bool       // f is set: ModTimeAtCommit goes to it
	mtime    time.Time  // the mtime its first commit is to set (ModTimeAtCommit)
	appended int64      // bytes appended by the kernel's FUSE_WRITEs (placeAppends false)
}

// Create answers at once with a file whose I/O waits for the master's
// create, sent in the background once fewer than Config.AsyncCreate are
// in flight. The kernel calls it only for a name its look-up found
// missing; if another mount made the name meanwhile, an exclusive create
// fails (and the file's close or fsync returns EIO), a plain one opens
// what is there, as Backend.Create does.
func (a *asyncCreate) Create(ctx context.Context, c chunkfs.Caller, p string, perm fs.FileMode, exclusive, truncate bool, at time.Time) (File, *chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	if err := a.settle(ctx, p); err != nil {
		return nil, nil, nil, err
	}
	select {
	case a.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, nil, &chunkfs.Error{Op: "create", Path: p, Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
	}
	now := a.clk.Now()
	pc := &pendingCreate{path: p, done: make(chan struct{}), fi: chunkfs.FileInfo{
		FileName: path.Base(p), FileMode: perm, UID: c.UID, GID: primaryGID(c),
		MTime: now, ATime: now, CTime: now, Nlink: 1}}
	a.mu.Lock()
	a.next++
	pc.fi.Inode = localInoBase + a.next
	a.pending[p] = pc
	parent := a.parentLocked(pc, now)
	a.mu.Unlock()
	a.all.Add(1)
	// The create acts as the caller the request came from (its context's
	// values), whatever becomes of the request.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout)
	go func() {
		defer cancel()
		a.run(bctx, pc, c, perm, exclusive, truncate)
	}()
	fi := pc.fi
	return pendingFile{pc: pc}, &fi, parent, nil
}

// parentLocked returns the attributes of pc's directory once pc is made
// in it at now, if Stat answered them within attrTimeout, for the
// kernel's look at the directory before its next create (noteAttr); a
// setgid directory gives pc its group, as the master will.
func (a *asyncCreate) parentLocked(pc *pendingCreate, now time.Time) *chunkfs.FileInfo {
	d := &a.dir
	if d.path != path.Dir(pc.path) || now.Sub(d.at) >= a.attrTimeout {
		return nil
	}
	if d.fi.FileMode&fs.ModeSetgid != 0 {
		pc.fi.GID = d.fi.GID
	}
	d.fi.MTime, d.fi.CTime = now, now
	fi := d.fi
	return &fi
}

// primaryGID is the group a new file of c gets in a directory without
// the setgid bit.
func primaryGID(c chunkfs.Caller) uint32 {
	if len(c.GIDs) == 0 {
		return 0
	}
	return c.GIDs[0]
}

// run sends pc's create and records its outcome.
func (a *asyncCreate) run(ctx context.Context, pc *pendingCreate, c chunkfs.Caller, perm fs.FileMode, exclusive, truncate bool) {
	defer a.all.Done()
	defer func() { <-a.slots }()
	// The file made has the times the mount answered, which the kernel
	// keeps (a commit of data after sets mtime again).
	f, fi, _, err := a.Backend.Create(ctx, c, pc.path, perm, true, false, pc.fi.MTime)
	existed := false
	if chunkfs.KindOf(err) == chunkfs.KindExist && !exclusive {
		f, fi, _, err = a.Backend.Create(ctx, c, pc.path, perm, false, truncate, time.Time{})
		existed = err == nil && fi.Length > 0
		if existed {
			pc.base = fi.Length
		}
	}
	a.mu.Lock()
	delete(a.pending, pc.path)
	if err == nil {
		a.toLocal[fi.Inode], a.toCluster[pc.fi.Inode] = pc.fi.Inode, fi.Inode
	}
	a.mu.Unlock()
	if err != nil {
		a.log.Warn("asynchronous create refused; the file's close or fsync returns EIO", "path", pc.path, "err", err)
		pc.err = &chunkfs.Error{Op: "create", Path: pc.path, Kind: chunkfs.KindOther, Err: err}
	}
	if t := pc.opened(f); !t.IsZero() {
		if _, err := a.Backend.SetAttr(ctx, chunkfs.Root, pc.path, SetAttr{MTime: &t}); err != nil {
			a.log.Warn("asynchronous create: the kernel's mtime not set", "path", pc.path, "err", err)
		}
	}
	close(pc.done)
	// After done: a call in the directory may be waiting for it while
	// the kernel holds the directory, which the drop needs.
	if err != nil {
		a.gone(pc.path)
	} else if existed {
		a.stale(pc.path)
	}
}

// opened hands the file its create opened (nil if refused) to pc, with
// the mtime the kernel asked its commit to carry meanwhile.
// It returns that mtime if f cannot carry it (not a modTimeCarrier), for
// the caller to set.
func (pc *pendingCreate) opened(f File) (uncarried time.Time) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.f, pc.isOpen = f, true
	if pc.mtime.IsZero() || f == nil {
		return time.Time{}
	}
	mc, ok := carrierOf(f)
	if !ok {
		return pc.mtime
	}
	mc.ModTimeAtCommit(pc.mtime)
	return time.Time{}
}

// settle waits for the creates in flight at p or under it.
func (a *asyncCreate) settle(ctx context.Context, p string) error {
	for {
		pc := a.inFlight(p)
		if pc == nil {
			return nil
		}
		select {
		case <-pc.done:
		case <-ctx.Done():
			return &chunkfs.Error{Op: "wait for create", Path: p, Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
		}
	}
}

// inFlight returns a create in flight at p or under it, or nil.
func (a *asyncCreate) inFlight(p string) *pendingCreate {
	a.mu.Lock()
	defer a.mu.Unlock()
	if pc := a.pending[p]; pc != nil {
		return pc
	}
	prefix := strings.TrimSuffix(p, "/") + "/"
	for q, pc := range a.pending {
		if strings.HasPrefix(q, prefix) {
			return pc
		}
	}
	return nil
}

// local returns fi with this mount's number of the file, if it has one.
func (a *asyncCreate) local(fi *chunkfs.FileInfo) *chunkfs.FileInfo {
	if fi == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	local, ok := a.toLocal[fi.Inode]
	if !ok {
		return fi
	}
	c := *fi
	c.Inode = local
	return &c
}

// cluster returns the cluster's number of the file this mount numbers ino.
func (a *asyncCreate) cluster(ino uint64) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.toCluster[ino]; ok {
		return c
	}
	return ino
}

func (a *asyncCreate) drain() { a.all.Wait() }

// listNames lists dir on the cluster with the names of the creates in
// flight in it: those in flight before the listing, of which the listing
// may lack any; the caller learns of those begun since (knownDirs.adding).
func (a *asyncCreate) listNames(ctx context.Context, c chunkfs.Caller, dir string) ([]string, error) {
	var inFlight []string
	a.mu.Lock()
	for q := range a.pending {
		if path.Dir(q) == dir {
			inFlight = append(inFlight, path.Base(q))
		}
	}
	a.mu.Unlock()
	return namesIn(ctx, a.Backend, c, dir, inFlight)
}

// Stat answers the mount's attributes of a file whose create is in
// flight, and a directory's with the times of the newest create in flight
// in it, as they will be once it is done.
func (a *asyncCreate) Stat(ctx context.Context, c chunkfs.Caller, p string) (*chunkfs.FileInfo, error) {
	a.mu.Lock()
	if pc := a.pending[p]; pc != nil {
		fi := pc.fi
		a.mu.Unlock()
		return &fi, nil
	}
	a.mu.Unlock()
	fi, err := a.Backend.Stat(ctx, c, p)
	if err != nil || !fi.IsDir() {
		return a.local(fi), err
	}
	d := *fi
	if t := a.newestIn(p); t.After(d.MTime) {
		d.MTime = t
		if t.After(d.CTime) {
			d.CTime = t
		}
	}
	a.mu.Lock()
	a.dir = seenDir{path: p, fi: d, at: a.clk.Now()}
	a.mu.Unlock()
	return &d, nil
}

// newestIn returns the time of the newest create in flight in directory
// dir, or zero.
func (a *asyncCreate) newestIn(dir string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var t time.Time
	for q, pc := range a.pending {
		if path.Dir(q) == dir && pc.fi.MTime.After(t) {
			t = pc.fi.MTime
		}
	}
	return t
}

// ReadDir lists the directory once the creates in it are done.
func (a *asyncCreate) ReadDir(ctx context.Context, c chunkfs.Caller, p string) ([]*chunkfs.FileInfo, error) {
	if err := a.settle(ctx, p); err != nil {
		return nil, err
	}
	fis, err := a.Backend.ReadDir(ctx, c, p)
	for i := range fis {
		fis[i] = a.local(fis[i])
	}
	return fis, err
}

// The calls below wait for the creates at and under the paths they name,
// and answer with this mount's numbers.

func (a *asyncCreate) Mkdir(ctx context.Context, c chunkfs.Caller, p string, perm fs.FileMode) (*chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	if err := a.settle(ctx, p); err != nil {
		return nil, nil, err
	}
	return a.Backend.Mkdir(ctx, c, p, perm)
}

func (a *asyncCreate) Open(ctx context.Context, c chunkfs.Caller, p string, write bool) (File, *chunkfs.FileInfo, error) {
	if err := a.settle(ctx, p); err != nil {
		return nil, nil, err
	}
	f, fi, err := a.Backend.Open(ctx, c, p, write)
	return f, a.local(fi), err
}

func (a *asyncCreate) Remove(ctx context.Context, c chunkfs.Caller, p string) (*chunkfs.FileInfo, error) {
	if err := a.settle(ctx, p); err != nil {
		return nil, err
	}
	return a.Backend.Remove(ctx, c, p)
}

func (a *asyncCreate) Rename(ctx context.Context, c chunkfs.Caller, src, dst string, how RenameHow) error {
	if err := a.settle(ctx, src); err != nil {
		return err
	}
	if err := a.settle(ctx, dst); err != nil {
		return err
	}
	return a.Backend.Rename(ctx, c, src, dst, how)
}

func (a *asyncCreate) Link(ctx context.Context, c chunkfs.Caller, oldpath, newpath string) (*chunkfs.FileInfo, error) {
	if err := a.settle(ctx, oldpath); err != nil {
		return nil, err
	}
	if err := a.settle(ctx, newpath); err != nil {
		return nil, err
	}
	fi, err := a.Backend.Link(ctx, c, oldpath, newpath)
	return a.local(fi), err
}

func (a *asyncCreate) SetAttr(ctx context.Context, c chunkfs.Caller, p string, s SetAttr) (*chunkfs.FileInfo, error) {
	if err := a.settle(ctx, p); err != nil {
		return nil, err
	}
	fi, err := a.Backend.SetAttr(ctx, c, p, s)
	return a.local(fi), err
}

func (a *asyncCreate) Mknod(ctx context.Context, c chunkfs.Caller, p string, mode fs.FileMode, dev uint32) (*chunkfs.FileInfo, error) {
	if err := a.settle(ctx, p); err != nil {
		return nil, err
	}
	return a.Backend.Mknod(ctx, c, p, mode, dev)
}

func (a *asyncCreate) Symlink(ctx context.Context, c chunkfs.Caller, target, p string) (*chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	if err := a.settle(ctx, p); err != nil {
		return nil, nil, err
	}
	return a.Backend.Symlink(ctx, c, target, p)
}

func (a *asyncCreate) GetXattr(ctx context.Context, c chunkfs.Caller, p, name string) ([]byte, error) {
	if err := a.settle(ctx, p); err != nil {
		return nil, err
	}
	return a.Backend.GetXattr(ctx, c, p, name)
}

func (a *asyncCreate) ListXattr(ctx context.Context, c chunkfs.Caller, p string) ([]string, error) {
	if err := a.settle(ctx, p); err != nil {
		return nil, err
	}
	return a.Backend.ListXattr(ctx, c, p)
}

func (a *asyncCreate) SetXattr(ctx context.Context, c chunkfs.Caller, p, name string, value []byte, flags uint32) error {
	if err := a.settle(ctx, p); err != nil {
		return err
	}
	return a.Backend.SetXattr(ctx, c, p, name, value, flags)
}

func (a *asyncCreate) RemoveXattr(ctx context.Context, c chunkfs.Caller, p, name string) error {
	if err := a.settle(ctx, p); err != nil {
		return err
	}
	return a.Backend.RemoveXattr(ctx, c, p, name)
}

func (a *asyncCreate) Lock(ctx context.Context, c chunkfs.Caller, p string, ino uint64, l locks.Lock, unlock, test, reclaim bool) (bool, locks.Lock, error) {
	if err := a.settle(ctx, p); err != nil {
		return false, locks.Lock{}, err
	}
	return a.Backend.Lock(ctx, c, p, a.cluster(ino), l, unlock, test, reclaim)
}

// pendingFile is the open file of a create in flight: its calls wait for
// the create, and fail with its error if the master refused it.
//
// Opened with O_APPEND (appending), its writes were placed by the kernel
// at the end of the empty file the mount answered; if the create opened
// another mount's file instead (base), they move past that file's data.
// How depends on the kernel cache (kernelCache.placesAppends): a kernel
// that places appends at the size it caches, and never takes a size from
// the mount for a file it caches, is off by base for the kernel inode's
// life; one that takes the mount's size again when its attributes expire
// is off by an amount that changes then, so each write lands after the
// last instead.
type pendingFile struct {
	pc      *pendingCreate
	appends bool // opened with O_APPEND
	shifts  bool // the kernel's offsets are off by pc.base (placesAppends)
}

// appending returns the file as a descriptor opened with O_APPEND makes
// it; shifts is kernelCache.placesAppends.
func (p pendingFile) appending(shifts bool) File {
	p.appends, p.shifts = true, shifts
	return p
}

// file waits for the create and returns the file it opened.
func (p pendingFile) file(ctx context.Context) (File, error) {
	select {
	case <-p.pc.done:
	case <-ctx.Done():
		return nil, &chunkfs.Error{Op: "wait for create", Path: p.pc.path, Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
	}
	if p.pc.err != nil {
		return nil, p.pc.err
	}
	return p.pc.f, nil
}

func (p pendingFile) ReadAt(ctx context.Context, b []byte, off int64) (int, error) {
	f, err := p.file(ctx)
	if err != nil {
		return 0, err
	}
	return f.ReadAt(ctx, b, off)
}

func (p pendingFile) WriteAt(ctx context.Context, b []byte, off int64) (int, error) {
	f, err := p.file(ctx)
	if err != nil {
		return 0, err
	}
	if !p.appends || p.pc.base == 0 {
		return f.WriteAt(ctx, b, off)
	}
	if p.shifts {
		return f.WriteAt(ctx, b, p.pc.base+off)
	}
	// The kernel sends one descriptor's appends one at a time.
	p.pc.mu.Lock()
	defer p.pc.mu.Unlock()
	n, err := f.WriteAt(ctx, b, p.pc.base+p.pc.appended)
	p.pc.appended += int64(n)
	return n, err
}

func (p pendingFile) Sync(ctx context.Context) error {
	f, err := p.file(ctx)
	if err != nil {
		return err
	}
	return f.Sync(ctx)
}

// Close closes the file once its create is done; a refused create has
// nothing to close (its error was logged, and returned by the I/O).
func (p pendingFile) Close() error {
	<-p.pc.done
	if p.pc.err != nil {
		return nil
	}
	return p.pc.f.Close()
}

func (p pendingFile) Moved(to string) error {
	<-p.pc.done
	if p.pc.err != nil {
		return nil
	}
	return p.pc.f.Moved(to)
}

// foundOther reports whether f is the file of an asynchronous create that
// opened another mount's file (pendingCreate.base): what the kernel and
// the data cache hold of it was figured from the empty file the mount
// answered, so neither is recorded as a version of the file.
func foundOther(f File) bool {
	for {
		switch w := f.(type) {
		case namedFile:
			f = w.File
		case pendingFile:
			select {
			case <-w.pc.done:
				return w.pc.base > 0
			default:
				return false
			}
		default:
			return false
		}
	}
}

// ModTimeAtCommit passes t to the file once its create has opened it,
// and keeps it until then (carryModTime): the push that waits for the
// create then commits the data with t.
func (p pendingFile) ModTimeAtCommit(t time.Time) bool {
	pc := p.pc
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.isOpen {
		if mc, ok := carrierOf(pc.f); ok {
			return mc.ModTimeAtCommit(t)
		}
		return false
	}
	pending := !pc.mtime.IsZero()
	pc.mtime = t
	return pending
}
