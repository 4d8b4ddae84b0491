package fusefs

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// An open file lives through its inode whatever happens to its name. The
// cluster names files by path, so the mount keeps the paths its open files
// name current (see docs/architecture.md, "Open files outlive their
// names"):
//
//   - a rename through the mount re-points every open file at or below
//     the source to its new path (File.Moved), with no I/O running
//     meanwhile;
//   - an unlink, or a rename over the name, of a file this mount has open
//     through that name renames it to a hidden name in the same directory
//     instead (NFS's "silly rename": .fuse_hidden<inode><n>), and the last
//     release of the file removes that name. fstat reports nlink 0
//     meanwhile, or the number of its other names (hard links). A file
//     open only through other names keeps them and loses this one; one
//     hidden already moves the open files of this name to its hidden one.
//
// Another mount's unlink still takes the data away: only the master could
// keep an inode alive for every mount's open descriptors.

// hiddenPrefix starts the names of files unlinked while open.
const hiddenPrefix = ".fuse_hidden"

// names owns the paths the mount's open files name in the cluster.
type names struct {
	// io is held shared by every call through an open file (namedFile)
	// and by an open until its handle is counted, and exclusively while
	// a rename or a hiding changes what paths open files name.
	io sync.RWMutex

	// mu guards open; a node's mu, when both are held, is taken first.
	mu sync.Mutex
	// open holds the nodes with open handles, and hidden nodes until
	// their hidden name is removed.
	open map[*node]struct{}
	// hiddenIno holds the inode numbers of hidden nodes, for the link
	// counts of the other names a hidden file may have (hard links).
	hiddenIno map[uint64]bool
	seq       atomic.Uint32 // numbers hidden names
}

func newNames() *names { return &names{open: map[*node]struct{}{}, hiddenIno: map[uint64]bool{}} }

// hid records whether inode ino has a hidden name.
func (s *names) hid(ino uint64, hidden bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hidden {
		s.hiddenIno[ino] = true
	} else {
		delete(s.hiddenIno, ino)
	}
}

// links leaves a hidden name out of the link count of a: a file unlinked
// while open has 0 links, as POSIX says, or as many as its other names.
// The cluster counts the hidden name, which is no name of the user's.
func (s *names) links(a *fuse.Attr) {
	s.mu.Lock()
	hidden := s.hiddenIno[a.Ino]
	s.mu.Unlock()
	if hidden && a.Nlink > 0 {
		a.Nlink--
	}
}

// opened and closed count nodes with open handles in or out.
func (s *names) opened(n *node) {
	s.mu.Lock()
	s.open[n] = struct{}{}
	s.mu.Unlock()
}

func (s *names) closed(n *node) {
	s.mu.Lock()
	delete(s.open, n)
	s.mu.Unlock()
}

// move is one rename's change of paths: from and what was below it are
// now at to and below it.
type move struct{ from, to string }

// moved re-points every open file at or below a move's from to the same
// place below its to, after the cluster made the moves at once (an
// exchange is two). s.io is held.
func (s *names) moved(moves ...move) error {
	s.mu.Lock()
	nodes := make([]*node, 0, len(s.open))
	for n := range s.open {
		nodes = append(nodes, n)
	}
	s.mu.Unlock()
	var first error
	for _, n := range nodes {
		if err := n.moved(moves); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// rebase returns p after the first of moves that concerns it, or false
// when none does.
func rebase(p string, moves []move) (string, bool) {
	for _, m := range moves {
		if p == m.from {
			return m.to, true
		}
		if rest, ok := strings.CutPrefix(p, m.from+"/"); ok && m.from != "/" {
			return path.Join(m.to, rest), true
		}
	}
	return "", false
}

// namedFile is an open file whose calls hold the mount's names shared, so
// that no call names a path a rename is changing.
type namedFile struct {
	File
	s *names
}

func (f namedFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.s.io.RLock()
	defer f.s.io.RUnlock()
	return f.File.ReadAt(ctx, p, off)
}

func (f namedFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.s.io.RLock()
	defer f.s.io.RUnlock()
	return f.File.WriteAt(ctx, p, off)
}

func (f namedFile) Sync(ctx context.Context) error {
	f.s.io.RLock()
	defer f.s.io.RUnlock()
	return f.File.Sync(ctx)
}

func (f namedFile) Close() error {
	f.s.io.RLock()
	defer f.s.io.RUnlock()
	return f.File.Close()
}

// moved re-points n's open files after the cluster made moves, if n's
// path was concerned. The names' io is held.
func (n *node) moved(moves []move) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var first error
	for h := range n.handles {
		if p, ok := rebase(h.name, moves); ok {
			h.name = p
			if err := h.f.Moved(p); err != nil && first == nil {
				first = err
			}
		}
	}
	if hp := n.hidden.Load(); hp != nil {
		if p, ok := rebase(*hp, moves); ok {
			n.hidden.Store(&p)
		}
	}
	return first
}

// setHidden records that n is now named by the hidden path p.
func (n *node) setHidden(p string) {
	n.mu.Lock()
	if n.gone == nil {
		n.gone = make(chan struct{})
	}
	n.mu.Unlock()
	n.hidden.Store(&p)
	n.m.names.hid(n.StableAttr().Ino, true)
}

// names reports whether an open file of n names path p.
func (n *node) names(p string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for h := range n.handles {
		if h.name == p {
			return true
		}
	}
	return false
}

// spare readies the removal of name from n (an unlink, or a rename over
// it), which names c, open on this mount: c's open files that name that
// path must name another of c's first. With none, c keeps the names its
// open files name (hard links) and nothing is done; when c is hidden
// already, they move to its hidden name; otherwise the name becomes a
// hidden one (hide), and spare reports it made the removal itself. The
// names' io is held.
func (n *node) spare(ctx context.Context, caller chunkfs.Caller, name string, c *node) (hid bool, err error) {
	p := n.child(name)
	switch hp := c.hidden.Load(); {
	case !c.names(p):
		return false, nil
	case hp != nil:
		return false, n.m.names.moved(move{p, *hp})
	}
	return true, n.hide(ctx, caller, name, c)
}

// isOpen reports whether the mount has n open.
func (n *node) isOpen() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.handles) > 0
}

// openChild returns n's child called name if it is a regular file the
// mount has open.
func (n *node) openChild(name string) *node {
	c := n.GetChild(name)
	if c == nil || c.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil
	}
	cn, ok := c.Operations().(*node)
	if !ok || !cn.isOpen() {
		return nil
	}
	return cn
}

// hide renames child c of n, called name and open on this mount, to a
// hidden name, as the caller (who needs the rights unlink needs), and
// re-points its open files there. The names' io is held.
func (n *node) hide(ctx context.Context, caller chunkfs.Caller, name string, c *node) error {
	src := n.child(name)
	var err error
	for range 8 {
		hidden := n.child(fmt.Sprintf("%s%016x%08x", hiddenPrefix, c.StableAttr().Ino, n.m.names.seq.Add(1)))
		err = n.m.b.Rename(ctx, caller, src, hidden, RenameNoReplace)
		if chunkfs.KindOf(err) == chunkfs.KindExist {
			continue // another mount's hidden file: try the next number
		}
		if err != nil {
			return err
		}
		c.setHidden(hidden)
		return n.m.names.moved(move{src, hidden})
	}
	return err
}

// releaseWait bounds how long an rmdir waits for the releases that remove
// hidden names from its directory while some handle of theirs has not
// been closed: the kernel sends a release just after the last close(2)
// returns, so a longer wait means a file still open. When every handle
// has been closed, the releases are on their way and the rmdir waits
// for them up to closedWait, as long as a loaded mount may take to run
// them.
const (
	releaseWait = 2 * time.Second
	closedWait  = 30 * time.Second
)

// awaitHidden waits until the hidden files of this mount directly in dir
// have had their names removed, if dir holds nothing else; it reports
// whether it waited for any.
func (s *names) awaitHidden(ctx context.Context, dir string) bool {
	s.mu.Lock()
	var hidden []*node
	for n := range s.open {
		if hp := n.hidden.Load(); hp != nil && path.Dir(*hp) == dir {
			hidden = append(hidden, n)
		}
	}
	s.mu.Unlock()
	var gone []chan struct{}
	wait := closedWait
	for _, n := range hidden {
		n.mu.Lock()
		if n.gone != nil { // nil: its name went meanwhile
			gone = append(gone, n.gone)
		}
		for h := range n.handles {
			if !h.closed.Load() {
				wait = releaseWait
			}
		}
		n.mu.Unlock()
	}
	if len(gone) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for _, g := range gone {
		select {
		case <-g:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// unhide removes n's hidden name at its last release, and then stops
// counting n as open: until then a rename of its directory re-points the
// hidden name, and an rmdir waits for it. A file with other names (hard
// links) is named by them again from the moment its hidden name starts
// to go. The names' io is held shared meanwhile, so no rename runs
// between the look at the name and its removal.
func (n *node) unhide(ctx context.Context) {
	if n.hidden.Load() == nil {
		return
	}
	n.m.names.io.RLock()
	defer n.m.names.io.RUnlock()
	n.mu.Lock()
	hp := n.hidden.Load()
	if hp == nil || len(n.handles) > 0 {
		n.mu.Unlock()
		return // opened again (through /proc/PID/fd or another name): a later release
	}
	n.unhiding.Store(true)
	n.mu.Unlock()
	n.m.names.hid(n.StableAttr().Ino, false) // before the name goes: see recount
	_, done := n.m.dirChange()               // the hidden name's directory changes
	_, err := n.m.b.Remove(ctx, chunkfs.Root, *hp)
	done()
	if err != nil && chunkfs.KindOf(err) != chunkfs.KindNotExist {
		n.m.log.Warn("remove hidden file", "path", *hp, "err", err)
	}
	n.recount()
	n.mu.Lock()
	n.hidden.Store(nil)
	n.unhiding.Store(false)
	if len(n.handles) == 0 {
		n.m.names.closed(n)
	}
	if n.gone != nil {
		close(n.gone)
		n.gone = nil
	}
	n.mu.Unlock()
}

// recount follows the removal of n's hidden name, or its rename back
// (done or failed). The name stopped being left out of n's link count
// just before (hid), so an answer of the cluster fetched meanwhile may
// count it: one link too many for a moment, never one too few (with 0
// links the kernel refuses link(2) of the file's other names, ENOENT).
// Such an answer goes now: the kernel drops n's attributes and ignores
// replies asked for before, and the listings kept for look-ups go.
func (n *node) recount() {
	n.m.lists.changed()
	n.NotifyContent(-1, 0) // attributes only; ENOENT: the kernel has forgotten n
}
