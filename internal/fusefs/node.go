package fusefs

import (
	"context"
	"io/fs"
	"log/slog"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// mount is what every node of one mount shares.
type mount struct {
	b     Backend
	cfg   Config
	log   *slog.Logger
	names *names // the paths open files name
	locks *lockManager
	lists *listings  // directory listings that answer bursts of look-ups (prefetch.go)
	known *knownDirs // directories whose every name the mount knows (knowndirs.go)

	// The caching modes, chosen by newMount (policy.go).
	kernel    kernelCache
	data      dataCache
	reader    reader
	newWriter func(f File, write bool) writer
	closer    closer // what close(2) waits for (asyncclose.go)
	// creates is b as create(2) uses it (asynccreate.go); b is it too.
	creates creator
	root    *node // the mount's root directory, once mounted
	// retimes: a cache follows versions across a change of times only
	// (the write-back cache's generations or the block cache).
	retimes bool
	clk     clock.Clock
	// mutations numbers the changes this mount starts that may alter a
	// directory's attributes (dirChange).
	mutations atomic.Uint64
	changeMu  sync.Mutex // orders a change's number and the count below
	changing  int        // changes numbered by dirChange and not ended
}

// newMount makes the state of a mount of b with cfg, choosing its caching
// modes.
func newMount(b Backend, cfg Config, log *slog.Logger, clk clock.Clock) *mount {
	m := &mount{b: b, cfg: cfg, log: log, names: newNames(),
		lists:     newListings(clk, cfg.PrefetchTimeout),
		known:     newKnownDirs(clk, cfg.NegativeTimeout),
		kernel:    newKernelCache(cfg, newFiles(clk)),
		data:      noData{},
		reader:    newReader(cfg),
		newWriter: newWriter(cfg),
		retimes:   cfg.WritebackCache || cfg.CacheSize > 0,
		clk:       clk,
	}
	if cfg.CacheSize > 0 {
		m.data = newBlockCache(cfg.CacheSize)
	}
	m.closer = newCloser(cfg, m.kernel, log)
	m.creates = newCreator(b, cfg, clk, log, m.dropEntry, m.dropAttr)
	m.b = m.creates
	m.locks = newLockManager(m.b, log)
	return m
}

// dirOf returns the kernel's inode of p's directory, and p's name in it;
// nil if the kernel holds no such directory.
func (m *mount) dirOf(p string) (*gofs.Inode, string) {
	dir := &m.root.Inode
	parent, name := path.Split(p)
	for _, c := range strings.Split(strings.Trim(parent, "/"), "/") {
		if c == "" {
			continue
		}
		if dir = dir.GetChild(c); dir == nil {
			return nil, ""
		}
	}
	return dir, name
}

// dropAttr makes the kernel ask again for the attributes of p, whose
// asynchronous create opened another mount's file instead of the empty
// one it answered. A negative offset keeps the pages (the kernel's own
// writes) and takes no lock a write in flight holds.
func (m *mount) dropAttr(p string) {
	if dir, name := m.dirOf(p); dir != nil {
		if c := dir.GetChild(name); c != nil {
			c.NotifyContent(-1, 0)
		}
	}
}

// dropEntry makes the kernel forget the name p, whose file an asynchronous
// create made and the master refused; an open descriptor of it then finds
// it gone (ENOENT).
func (m *mount) dropEntry(p string) {
	dir, name := m.dirOf(p)
	if dir == nil {
		return
	}
	if c := dir.GetChild(name); c != nil {
		if cn, ok := c.Operations().(*node); ok {
			cn.refused.Store(true)
		}
	}
	dir.RmChild(name)
	if e := dir.NotifyEntry(name); e != 0 && e != syscall.ENOENT {
		m.log.Warn("the kernel keeps the name of a refused create", "path", p, "err", e)
	}
}

// call returns a context for one call to the cluster, bounded by OpTimeout.
func (m *mount) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.cfg.OpTimeout)
}

// mutation returns the context for a call that changes the cluster. It
// ignores the kernel's interrupts (FUSE_INTERRUPT, when a signal reaches
// the caller): a change already sent may be applied whatever the caller
// does, and answering EINTR or EIO for a change that happened would
// mislead it. OpTimeout still bounds the call, and a fatal signal ends the
// caller's wait in the kernel anyway. Reads and look-ups use call and stay
// interruptible.
//
// Every change starts here or at fileChange, so it also drops the
// listings kept for look-ups (prefetch.go) before it reaches the cluster.
func (m *mount) mutation(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel, _ := m.mutationAt(ctx)
	return ctx, cancel
}

// mutationAt is mutation, and also returns the change's number in this
// mount (dirChange); the change ends at the returned cancel.
func (m *mount) mutationAt(ctx context.Context) (context.Context, context.CancelFunc, uint64) {
	return m.changeAt(ctx, m.lists.changed)
}

// changeAt is mutationAt with drop in place of dropping every listing.
func (m *mount) changeAt(ctx context.Context, drop func()) (context.Context, context.CancelFunc, uint64) {
	gen, done := m.dirChange()
	drop()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.OpTimeout)
	return ctx, func() { cancel(); done() }, gen
}

// listingsDrop returns how a change of n alone (its attributes, or the
// removal of its name p) updates the listings kept for look-ups: when n
// is a non-directory with one name, forgetting p before the change and
// again once it is done (the caller defers done); else dropping every
// listing, as any change does (another name of n would keep its old
// attributes).
func (m *mount) listingsDrop(n *node, p string) (drop, done func()) {
	fi := n.lastSeen()
	if fi == nil || fi.IsDir() || fi.Nlink != 1 || n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return m.lists.changed, func() {}
	}
	forget := func() { m.lists.forget(p) }
	return forget, forget
}

// fileChange is mutation for a change of one non-directory's data or
// attributes alone (a push, a setattr, a lock): it leaves every
// directory's attributes as they were, so a note (noteAttr) stands
// through it.
func (m *mount) fileChange(ctx context.Context) (context.Context, context.CancelFunc) {
	return m.fileChangeWith(ctx, m.lists.changed)
}

// fileChangeWith is fileChange with drop in place of dropping every
// listing.
func (m *mount) fileChangeWith(ctx context.Context, drop func()) (context.Context, context.CancelFunc) {
	drop()
	return context.WithTimeout(context.WithoutCancel(ctx), m.cfg.OpTimeout)
}

// unnaming starts a change that moves names (a rename, or an unlink
// that hides an open file), which drops what the mount knows of
// directories' names (knowndirs.go); the returned func, called once the
// change is done, drops it again, so that no listing fetched while the
// change was under way is kept.
func (m *mount) unnaming() (done func()) {
	m.known.changed()
	return m.known.changed
}

// dirChange numbers a change of this mount that may alter a directory's
// attributes; done, called once or more, ends it. The number is 0 when
// another such change was under way as it started: the master may apply
// the two in either order, so what this one answers of a directory may
// predate the other's effect, and it notes nothing (noteAttr).
func (m *mount) dirChange() (gen uint64, done func()) {
	m.changeMu.Lock()
	gen = m.mutations.Add(1)
	if m.changing > 0 {
		gen = 0
	}
	m.changing++
	m.changeMu.Unlock()
	var once sync.Once
	return gen, func() {
		once.Do(func() {
			m.changeMu.Lock()
			m.changing--
			m.changeMu.Unlock()
		})
	}
}

// noteAttr keeps fi, the attributes of directory n that the master
// returned with change number gen (the parent of an unlink, a create, a
// mkdir or a symlink), for n's next Getattr: the kernel asks for them
// after each of those (its permission check for the next one), and the
// answer then costs no call. A note is kept only when no other change that may alter
// a directory was under way as gen started (dirChange), and serves once,
// within AttrTimeout, only while no such change has started since gen:
// the changes of a file alone (fileChange) leave it standing. So it is as
// fresh as the kernel's own attribute cache, which other mounts' changes
// also reach only after AttrTimeout.
func (m *mount) noteAttr(n *node, fi *chunkfs.FileInfo, gen uint64) {
	if fi == nil || gen == 0 || m.cfg.AttrTimeout <= 0 {
		return
	}
	n.noted.Store(&attrNote{fi: fi, gen: gen, until: m.clk.Now().Add(m.cfg.AttrTimeout)})
}

// notedAttr takes n's note, if it still holds (noteAttr).
func (m *mount) notedAttr(n *node) *chunkfs.FileInfo {
	a := n.noted.Swap(nil)
	if a == nil || a.gen != m.mutations.Load() || !m.clk.Now().Before(a.until) {
		return nil
	}
	return a.fi
}

// attrNote is a directory's attributes as a change of this mount left
// them (noteAttr).
type attrNote struct {
	fi    *chunkfs.FileInfo
	gen   uint64    // the change's number in the mount
	until time.Time // when the note expires
}

// node is a file, directory or symbolic link of the mount. It is named by
// its path, which go-fuse's tree keeps current across renames, or by the
// hidden name it was given when unlinked while open (names.go).
type node struct {
	gofs.Inode
	m *mount

	mu      sync.Mutex             // guards handles (and each one's name), cached and gen
	handles map[*handle]struct{}   // open file handles
	cached  version                // version of the file the kernel's page cache holds
	gen     uint64                 // bumped by every write or truncate through this mount
	written atomic.Bool            // written since the last close recorded the version
	hidden  atomic.Pointer[string] // the hidden path of a file unlinked while open
	// unhiding is set while the hidden name is being removed: the file's
	// other names (hard links), if any, name it meanwhile.
	unhiding atomic.Bool
	// gone is closed once a hidden node's name is removed (made by
	// setHidden under mu, closed and cleared by unhide under mu).
	gone chan struct{}
	// noted is the directory's attributes as this mount's last unlink in
	// it left them, for the next Getattr (mount.noteAttr).
	noted atomic.Pointer[attrNote]
	// committed is the file's attributes after its last commit through
	// this mount, for the close that follows (takeCommitted).
	committed atomic.Pointer[committed]
	// seen is the attributes last answered to the kernel (sawAttr).
	seen atomic.Pointer[chunkfs.FileInfo]
	// refused is set when the master refused the file's asynchronous
	// create (mount.dropEntry).
	refused atomic.Bool
}

// version identifies the contents of a file for io-cache: unchanged size
// and mtime mean the cached pages are still good.
type version struct {
	ok    bool
	size  int64
	mtime time.Time
}

func versionOf(fi *chunkfs.FileInfo) version {
	return version{ok: true, size: fi.Length, mtime: fi.MTime}
}

func (m *mount) newNode() *node { return &node{m: m, handles: map[*handle]struct{}{}} }

// path returns the node's absolute path in the cluster.
func (n *node) path() string {
	if hp := n.hidden.Load(); hp != nil && !n.unhiding.Load() {
		return *hp
	}
	return "/" + n.Path(nil)
}

func (n *node) child(name string) string { return path.Join(n.path(), name) }

// detached reports whether the node has left the tree with no hidden
// name: a file unlinked or renamed over while not open here. Its path
// would be the root's, so a call for it (the kernel writing back the
// times of an inode it evicts after an unlink) must not reach the
// cluster.
func (n *node) detached() bool {
	if n.hidden.Load() != nil || n.IsRoot() {
		return false
	}
	_, parent := n.Parent()
	return parent == nil
}

// goneErrno is what a call on a detached node answers: EIO for a file
// whose asynchronous create the master refused (its I/O fails so),
// ENOENT for any other.
func (n *node) goneErrno() syscall.Errno {
	if n.refused.Load() {
		return syscall.EIO
	}
	return syscall.ENOENT
}

// checkChild rejects a name no Linux file system accepts, and a child
// whose whole path in the cluster would be longer than the cluster takes:
// ENAMETOOLONG either way, as a local file system answers.
func (n *node) checkChild(name string) syscall.Errno {
	if len(name) > chunkfs.MaxNameLen || len(n.child(name)) > chunkfs.MaxPathLen {
		return syscall.ENAMETOOLONG
	}
	return 0
}

// entry fills out for fi and returns the child inode of n named by fi.
func (n *node) entry(ctx context.Context, fi *chunkfs.FileInfo, out *fuse.EntryOut) *gofs.Inode {
	fillAttr(fi, &out.Attr)
	n.m.names.links(&out.Attr) // another name of a file hidden while open
	out.SetEntryTimeout(n.m.cfg.EntryTimeout)
	out.SetAttrTimeout(n.m.cfg.AttrTimeout)
	st := gofs.StableAttr{Mode: out.Attr.Mode & syscall.S_IFMT, Ino: fi.Inode}
	if fi.FileMode.IsRegular() {
		st.Gen = n.m.kernel.lookedUp(fi)
	}
	ch := n.NewInode(ctx, n.m.newNode(), st)
	if c, ok := ch.Operations().(*node); ok {
		c.sawAttr(fi)
	}
	return ch
}

// sawAttr adds the size of writes not yet pushed to a fresh view of the
// file, so that the kernel never sees a file shrink under its own writes.
func (n *node) sawAttr(fi *chunkfs.FileInfo) {
	if end := n.dirtyEnd(); end > fi.Length {
		fi.Length = end
	}
	seen := *fi
	n.seen.Store(&seen)
}

// lastSeen returns a copy of the attributes sawAttr last saw, or nil.
func (n *node) lastSeen() *chunkfs.FileInfo {
	fi := n.seen.Load()
	if fi == nil {
		return nil
	}
	c := *fi
	return &c
}

var _ = (gofs.NodeOnForgetter)((*node)(nil))

// OnForget drops what the mount knows of a file the kernel forgot.
func (n *node) OnForget() { n.m.kernel.forgot(n) }

var _ = (gofs.NodeLookuper)((*node)(nil))

// Lookup finds a child by name.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := n.checkChild(name); e != 0 {
		return nil, e
	}
	cctx, cancel := n.m.call(ctx)
	defer cancel()
	if e := n.settleChild(cctx, name); e != 0 {
		return nil, e
	}
	if n.knownMissing(ctx, name) {
		return nil, syscall.ENOENT
	}
	if fi, ok := n.listedLookup(ctx, name); ok {
		return n.entry(ctx, fi, out), 0
	}
	fi, err := n.m.b.Stat(cctx, callerOf(ctx), n.child(name))
	if err != nil {
		return nil, errno(err)
	}
	return n.entry(ctx, fi, out), 0
}

// settleChild waits for the pushes in flight of the child name, if the
// kernel knows it (closer.wait).
func (n *node) settleChild(ctx context.Context, name string) syscall.Errno {
	ch := n.GetChild(name)
	if ch == nil {
		return 0
	}
	if c, ok := ch.Operations().(*node); ok {
		return errno(n.m.closer.wait(ctx, c))
	}
	return 0
}

var _ = (gofs.NodeGetattrer)((*node)(nil))

// Getattr asks the cluster for the node's attributes.
func (n *node) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if n.detached() {
		return n.goneErrno()
	}
	fi := n.m.notedAttr(n)
	if fi == nil {
		cctx, cancel := n.m.call(ctx)
		defer cancel()
		if err := n.m.closer.wait(cctx, n); err != nil {
			return errno(err)
		}
		var err error
		if fi, err = n.m.b.Stat(cctx, callerOf(ctx), n.path()); err != nil {
			return errno(err)
		}
	}
	n.sawAttr(fi)
	fillAttr(fi, &out.Attr)
	n.m.names.links(&out.Attr)
	out.SetTimeout(n.m.cfg.AttrTimeout)
	return 0
}

var _ = (gofs.NodeSetattrer)((*node)(nil))

// Setattr changes mode, owner, times and length. Writes still buffered
// are pushed first: a truncation or a utimens (tar sets mtime on the open
// file) orders after them, and the size answered is the file's.
func (n *node) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.detached() {
		return n.goneErrno()
	}
	var cctx context.Context
	var cancel context.CancelFunc
	if n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFDIR {
		cctx, cancel = n.m.mutation(ctx)
	} else {
		drop, done := n.m.listingsDrop(n, n.path())
		defer done()
		cctx, cancel = n.m.fileChangeWith(ctx, drop)
	}
	defer cancel()
	if err := n.m.closer.wait(cctx, n); err != nil {
		return errno(err)
	}
	a := setAttrOf(in)
	caller := callerOf(ctx)
	h, _ := f.(*handle)
	if h != nil && h.write && a.Perm == nil && a.UID == nil && a.GID == nil {
		// ftruncate(2), or the kernel writing back its own mtime: the
		// right of the open descriptor, as the kernel has checked
		// (default_permissions), not the file's mode now.
		caller = chunkfs.Root
	}
	if fi, err := n.carryModTime(cctx, h, a); err != nil || fi != nil {
		if err != nil {
			return errno(err)
		}
		n.sawAttr(fi)
		fillAttr(fi, &out.Attr)
		n.m.names.links(&out.Attr)
		out.SetTimeout(n.m.cfg.AttrTimeout)
		return 0
	}
	if err := n.flushAll(cctx); err != nil {
		return errno(err)
	}
	if a.Size != nil {
		n.bump()
	}
	before := n.timesOnly(cctx, a)
	fi, err := n.m.b.SetAttr(cctx, caller, n.path(), a)
	if a.Size != nil {
		n.m.data.drop(n.StableAttr().Ino)
	}
	if err != nil {
		return errno(err)
	}
	if before.ok {
		n.retimed(before, versionOf(fi))
	}
	n.sawAttr(fi)
	fillAttr(fi, &out.Attr)
	n.m.names.links(&out.Attr)
	out.SetTimeout(n.m.cfg.AttrTimeout)
	return 0
}

// timesOnly returns the file's version before a setattr that changes
// only its times (as the kernel's write-back cache sends its own mtime
// after writes), or no version for any other setattr or node.
func (n *node) timesOnly(ctx context.Context, a SetAttr) version {
	if a.MTime == nil || a.Size != nil || a.Perm != nil || a.UID != nil || a.GID != nil ||
		n.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFREG || !n.m.retimes {
		return version{}
	}
	fi, err := n.m.b.Stat(ctx, chunkfs.Root, n.path())
	if err != nil {
		return version{}
	}
	return versionOf(fi)
}

// retimed follows a change of times made through this mount: what the
// caches hold for the version before it holds for the version after it.
func (n *node) retimed(before, after version) {
	n.m.kernel.retimed(n, before, after)
	n.m.data.retimed(n.StableAttr().Ino, before, after)
}

// setAttrOf lists the changes a FUSE setattr asks for.
func setAttrOf(in *fuse.SetAttrIn) SetAttr {
	var a SetAttr
	if m, ok := in.GetMode(); ok {
		p := goPerm(m)
		a.Perm = &p
	}
	if u, ok := in.GetUID(); ok {
		a.UID = &u
	}
	if g, ok := in.GetGID(); ok {
		a.GID = &g
	}
	if t, ok := in.GetATime(); ok {
		a.ATime = &t
	}
	if t, ok := in.GetMTime(); ok {
		a.MTime = &t
	}
	if s, ok := in.GetSize(); ok {
		l := int64(s)
		a.Size = &l
	}
	const now = fuse.FATTR_ATIME | fuse.FATTR_MTIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW
	a.TimesNow = in.Valid&now == now
	return a
}

var _ = (gofs.NodeMkdirer)((*node)(nil))

// Mkdir makes a directory. The kernel has applied the caller's umask to
// mode already; the daemon's own umask plays no part.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := n.checkChild(name); e != 0 {
		return nil, e
	}
	cctx, cancel, gen := n.m.mutationAt(ctx)
	defer cancel()
	n.m.known.adding(n.path(), name)
	fi, parent, err := n.m.b.Mkdir(cctx, callerOf(ctx), n.child(name), goPerm(mode))
	if err != nil {
		return nil, errno(err)
	}
	n.m.known.made(n.child(name))
	n.m.noteAttr(n, parent, gen)
	return n.entry(ctx, fi, out), 0
}

var _ = (gofs.NodeRmdirer)((*node)(nil))

// Rmdir removes an empty directory; the kernel has checked it is one. A
// directory that holds only hidden names of files this mount had open is
// removed once their releases, which the kernel sends just after the last
// close, have removed them (names.go).
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	e := n.remove(ctx, name)
	if e == syscall.ENOTEMPTY && n.m.names.awaitHidden(ctx, n.child(name)) {
		e = n.remove(ctx, name)
	}
	return e
}

var _ = (gofs.NodeUnlinker)((*node)(nil))

// Unlink removes a file or symbolic link; the kernel has checked it is not
// a directory. A file this mount has open through that name gets a hidden
// name instead, kept until its last release, unless it has one already
// (names.go, spare).
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.openChild(name) != nil {
		defer n.m.unnaming()() // the hidden name it may get
		cctx, cancel := n.m.mutation(ctx)
		defer cancel()
		n.m.names.io.Lock()
		defer n.m.names.io.Unlock()
		if c := n.openChild(name); c != nil {
			hid, err := n.spare(cctx, callerOf(ctx), name, c)
			if err != nil || hid {
				return errno(err)
			}
		}
	}
	return n.remove(ctx, name)
}

func (n *node) remove(ctx context.Context, name string) syscall.Errno {
	drop, done := n.m.lists.changed, func() {}
	if c := n.GetChild(name); c != nil {
		if cn, ok := c.Operations().(*node); ok {
			drop, done = n.m.listingsDrop(cn, n.child(name))
		}
	}
	defer done()
	cctx, cancel, gen := n.m.changeAt(ctx, drop)
	defer cancel()
	parent, err := n.m.b.Remove(cctx, callerOf(ctx), n.child(name))
	if err != nil {
		return errno(err)
	}
	n.m.noteAttr(n, parent, gen)
	if c := n.GetChild(name); c != nil {
		n.m.data.drop(c.StableAttr().Ino)
	}
	return 0
}

var _ = (gofs.NodeRenamer)((*node)(nil))

// Rename moves a child, replacing the target atomically unless
// RENAME_NOREPLACE, or swaps it with the target (RENAME_EXCHANGE), in one
// call to the master. Open files at or below the source (and the target,
// for an exchange) are re-pointed at their new paths; a target this mount
// has open is hidden first, so that its descriptors keep working
// (names.go).
func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	how, ok := renameHow(flags)
	if !ok {
		return syscall.EINVAL
	}
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if e := np.checkChild(newName); e != 0 {
		return e
	}
	defer n.m.unnaming()()
	cctx, cancel := n.m.mutation(ctx)
	defer cancel()
	caller, src, dst := callerOf(ctx), n.child(name), np.child(newName)
	n.m.names.io.Lock()
	defer n.m.names.io.Unlock()
	var hidden *node
	if c := np.openChild(newName); c != nil && how == RenameReplace && c != n.openChild(name) {
		hid, err := np.spare(cctx, caller, newName, c)
		if err != nil {
			return errno(err)
		}
		if hid {
			hidden = c
		}
	}
	if err := n.m.b.Rename(cctx, caller, src, dst, how); err != nil {
		if hidden != nil {
			np.unhideBack(cctx, caller, newName, hidden)
		}
		return errno(err)
	}
	if how == RenameExchange {
		return errno(n.m.names.moved(move{src, dst}, move{dst, src}))
	}
	return errno(n.m.names.moved(move{src, dst}))
}

// renameHow reads rename(2)'s flags; false for flags it does not know.
func renameHow(flags uint32) (RenameHow, bool) {
	const noReplace, exchange = 1, 2 // RENAME_NOREPLACE, RENAME_EXCHANGE
	switch flags {
	case 0:
		return RenameReplace, true
	case noReplace:
		return RenameNoReplace, true
	case exchange:
		return RenameExchange, true
	}
	return 0, false
}

// unhideBack gives hidden child c of n its name back after the rename it
// was hidden for failed.
func (n *node) unhideBack(ctx context.Context, caller chunkfs.Caller, name string, c *node) {
	hp := c.hidden.Load()
	dst := n.child(name)
	n.m.names.hid(c.StableAttr().Ino, false) // before the name comes back: see recount
	if err := n.m.b.Rename(ctx, caller, *hp, dst, RenameNoReplace); err != nil {
		n.m.names.hid(c.StableAttr().Ino, true)
		c.recount()
		n.m.log.Warn("rename hidden file back", "path", *hp, "err", err)
		return
	}
	c.recount()
	c.hidden.Store(nil)
	if err := n.m.names.moved(move{*hp, dst}); err != nil {
		n.m.log.Warn("rename hidden file back", "path", dst, "err", err)
	}
}

var _ = (gofs.NodeSymlinker)((*node)(nil))

// Symlink makes a symbolic link.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := n.checkChild(name); e != 0 {
		return nil, e
	}
	if len(target) > chunkfs.MaxSymlinkLen {
		return nil, syscall.ENAMETOOLONG
	}
	cctx, cancel, gen := n.m.mutationAt(ctx)
	defer cancel()
	n.m.known.adding(n.path(), name)
	fi, parent, err := n.m.b.Symlink(cctx, callerOf(ctx), target, n.child(name))
	if err != nil {
		return nil, errno(err)
	}
	n.m.noteAttr(n, parent, gen)
	return n.entry(ctx, fi, out), 0
}

var _ = (gofs.NodeReadlinker)((*node)(nil))

// Readlink returns a symbolic link's target.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	cctx, cancel := n.m.call(ctx)
	defer cancel()
	t, err := n.m.b.Readlink(cctx, callerOf(ctx), n.path())
	if err != nil {
		return nil, errno(err)
	}
	return []byte(t), 0
}

var _ = (gofs.NodeLinker)((*node)(nil))

// Link gives target the further name name in n, a hard link (the kernel
// refuses directories and files with no name left itself). The new entry
// is target's own inode, so that both names share one page cache, one
// set of open files and one lock table entry.
func (n *node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := n.checkChild(name); e != 0 {
		return nil, e
	}
	tn, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	cctx, cancel := n.m.mutation(ctx)
	defer cancel()
	n.m.known.adding(n.path(), name)
	fi, err := n.m.b.Link(cctx, callerOf(ctx), tn.path(), n.child(name))
	if chunkfs.KindOf(err) == chunkfs.KindTooLarge {
		return nil, syscall.EMLINK // the most names an inode may have (namespace.MaxLinks)
	}
	if err != nil {
		return nil, errno(err)
	}
	tn.sawAttr(fi)
	fillAttr(fi, &out.Attr)
	n.m.names.links(&out.Attr)
	out.SetEntryTimeout(n.m.cfg.EntryTimeout)
	out.SetAttrTimeout(n.m.cfg.AttrTimeout)
	return tn.EmbeddedInode(), 0
}

var _ = (gofs.NodeMknoder)((*node)(nil))

// Mknod makes regular files, fifos, sockets and device nodes; all but
// regular files are metadata-only inodes, whose traffic the kernel
// carries itself (the kernel has checked that the caller may make a
// device node).
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	var typ fs.FileMode
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return n.mknodFile(ctx, name, mode, out)
	case syscall.S_IFIFO:
		typ = fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		typ = fs.ModeSocket
	case syscall.S_IFCHR:
		typ = fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		typ = fs.ModeDevice
	default:
		return nil, syscall.EINVAL
	}
	if typ&fs.ModeDevice == 0 {
		dev = 0
	}
	if e := n.checkChild(name); e != 0 {
		return nil, e
	}
	cctx, cancel := n.m.mutation(ctx)
	defer cancel()
	n.m.known.adding(n.path(), name)
	fi, err := n.m.b.Mknod(cctx, callerOf(ctx), n.child(name), typ|goPerm(mode), dev)
	if err != nil {
		return nil, errno(err)
	}
	return n.entry(ctx, fi, out), 0
}

// mknodFile makes an empty regular file, as mknod(2) with S_IFREG does.
func (n *node) mknodFile(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := n.checkChild(name); e != 0 {
		return nil, e
	}
	cctx, cancel, gen := n.m.mutationAt(ctx)
	defer cancel()
	n.m.known.adding(n.path(), name)
	f, fi, parent, err := n.m.b.Create(cctx, callerOf(ctx), n.child(name), goPerm(mode), true, false, time.Time{})
	if err != nil {
		return nil, errno(err)
	}
	n.m.noteAttr(n, parent, gen)
	if err := f.Close(); err != nil {
		return nil, errno(err)
	}
	return n.entry(ctx, fi, out), 0
}

var _ = (gofs.NodeStatfser)((*node)(nil))

// Statfs reports the cluster's capacity.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	cctx, cancel := n.m.call(ctx)
	defer cancel()
	u, err := n.m.b.Usage(cctx)
	if err != nil {
		return errno(err)
	}
	const bs = 4096
	out.Bsize, out.Frsize = bs, bs
	out.Blocks = uint64(max(u.Capacity, 0)) / bs
	out.Bfree = uint64(max(u.Free, 0)) / bs
	out.Bavail = out.Bfree
	out.Files = uint64(max(u.Files, 0)) + 1<<32
	out.Ffree = 1 << 32
	out.NameLen = chunkfs.MaxNameLen
	return 0
}
