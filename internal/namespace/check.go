package namespace

import (
	"fmt"

	"github.com/chunkfs/chunkfs"
)

// Check verifies the namespace's invariants and returns the first violation:
// tree links (every directory named once, by the directory it names as its
// parent), sorted unique names, unique inode numbers below the counter,
// link counts (a non-directory named by as many entries as its count, an
// inode with several names the same inode under each), per-type fields,
// every chunk indexed and its reference count (the inodes holding it, more
// than one after a snapshot) equal to the references in the tree, handles below the
// counter, versions at least 1, the summary counts, and held-back replicas
// only of existing chunks at their version or above. Tests run it after
// every case; `chunkfs admin fsck` can run it too.
func (ns *Namespace) Check() error {
	c := &checker{ns: ns, refs: make(map[chunkfs.Handle]int, ns.handles.shared), inodes: newInodeSet(ns.nextInode, ns.files+ns.dirs), links: map[*inode]uint32{}}
	if ns.root.ino() != RootInode || !ns.root.isDir() || ns.root.ext() == nil || ns.root.ext().parent != nil || ns.root.nlink != 0 {
		return fmt.Errorf("namespace: bad root")
	}
	c.node(ns.root, "/")
	if c.err != nil {
		return c.err
	}
	live := Counts{Files: c.files, Dirs: c.dirs, Bytes: c.bytes}
	if err := c.trash(); err != nil {
		return err
	}
	// The trash may hold chunks the live tree shares (snapshots):
	// references are counted over both.
	c.checkRefs()
	if c.err != nil {
		return c.err
	}
	for n, seen := range c.links {
		if seen != uint32(n.nlink) {
			return fmt.Errorf("namespace: inode %d has %d names, counts %d", n.ino(), seen, n.nlink)
		}
	}
	if c.chunks != int64(ns.handles.len()) {
		return fmt.Errorf("namespace: the index holds %d chunks, the tree and the trash %d", ns.handles.len(), c.chunks)
	}
	// A chunk counts as dead when only the trash holds it; which entry
	// counts it depends on when its other holders let go, so the live
	// count is checked against its bounds only.
	want := ns.Counts()
	live.Chunks = want.Chunks
	if live != want || want.Chunks < 0 {
		return fmt.Errorf("namespace: counts %+v, tree has %+v", want, live)
	}
	return ns.checkHeld()
}

// checkHeld checks the held-back replicas: each of an existing chunk, at
// its logged version or above, and their count.
func (ns *Namespace) checkHeld() error {
	n := 0
	for h, list := range ns.held {
		v, ok := ns.ChunkVersion(h)
		if !ok || len(list) == 0 {
			return fmt.Errorf("namespace: held-back replicas of chunk %d, which no file holds (or none)", h)
		}
		for _, b := range list {
			if b.Version < v {
				return fmt.Errorf("namespace: chunk %d at version %d holds %s back at %d", h, v, b.Server, b.Version)
			}
		}
		n += len(list)
	}
	if n != ns.heldCount {
		return fmt.Errorf("namespace: %d held-back replicas, counted %d", n, ns.heldCount)
	}
	return nil
}

// trash checks the trash: entries in ID order below the counter, each a
// tree named once (by the entry) and holding what its counts say, and
// the dead counts their sum.
func (c *checker) trash() error {
	t := &c.ns.trash
	var dead Counts
	var prev uint64
	c.inTrash = true
	defer func() { c.inTrash = false }()
	live := 0
	for i, e := range t.entries {
		path := t.path(i)
		live += len(path)
		p := fmt.Sprintf("trash entry %d (%s)", e.id, printable(path))
		if e.id <= prev || e.id > t.nextID || pathProblem(path) != "" || path == "/" {
			return fmt.Errorf("namespace: %s: bad ID or path", p)
		}
		prev = e.id
		if e.node.isDir() && e.node.ext().parent != nil {
			return fmt.Errorf("namespace: %s: a deleted directory with a parent", p)
		}
		c.files, c.dirs, c.bytes, c.held = 0, 0, 0, 0
		c.entry(e.node, p)
		if c.err != nil {
			return c.err
		}
		sum := e.sum()
		got := Counts{Files: c.files, Dirs: c.dirs, Chunks: sum.Chunks, Bytes: c.bytes}
		if got != sum || sum.Chunks > c.held {
			return fmt.Errorf("namespace: %s: counts %+v, tree has %+v holding %d chunks", p, sum, got, c.held)
		}
		dead.Files, dead.Dirs, dead.Chunks, dead.Bytes = dead.Files+got.Files, dead.Dirs+got.Dirs, dead.Chunks+got.Chunks, dead.Bytes+got.Bytes
	}
	if dead != t.dead {
		return fmt.Errorf("namespace: dead counts %+v, trash has %+v", t.dead, dead)
	}
	if live+t.deadPaths != len(t.paths) || t.deadPaths > len(t.paths)/2 {
		return fmt.Errorf("namespace: trash paths of %d bytes, %d live and %d dead", len(t.paths), live, t.deadPaths)
	}
	if t.period < 0 || t.period > MaxTrashPeriod {
		return fmt.Errorf("namespace: trash period %d out of range", t.period)
	}
	return nil
}

type checker struct {
	ns                         *Namespace
	refs                       map[chunkfs.Handle]int // references seen to each chunk
	inodes                     inodeSet
	links                      map[*inode]uint32 // entries seen naming each inode with several names
	files, dirs, bytes, chunks int64
	held                       int64 // chunk references of the trash entry being checked
	inTrash                    bool  // the inodes checked are a trash entry's
	err                        error
}

// inodeSet records inode numbers seen: a bitmap when the numbers are dense
// enough, a map otherwise.
type inodeSet struct {
	bits []uint64
	m    map[uint64]bool
}

func newInodeSet(next uint64, count int64) inodeSet {
	if next <= uint64(count)*64+1<<20 {
		return inodeSet{bits: make([]uint64, next/64+1)}
	}
	return inodeSet{m: make(map[uint64]bool)}
}

// add records ino and reports whether it was new.
func (s *inodeSet) add(ino uint64) bool {
	if s.m != nil {
		if s.m[ino] {
			return false
		}
		s.m[ino] = true
		return true
	}
	w, b := ino/64, uint64(1)<<(ino%64)
	if w >= uint64(len(s.bits)) || s.bits[w]&b != 0 {
		return false
	}
	s.bits[w] |= b
	return true
}

func (c *checker) fail(p, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("namespace: %s: %s", p, fmt.Sprintf(format, args...))
	}
}

// entry checks an entry of a directory naming n at p: an inode with
// several names is checked at its first.
func (c *checker) entry(n *inode, p string) {
	switch {
	case n.nlink == 0:
		c.fail(p, "inode %d has a name but a link count of 0", n.ino())
	case n.isDir() && n.nlink != 1:
		c.fail(p, "directory with a link count of %d", n.nlink)
	case n.nlink > MaxLinks:
		c.fail(p, "link count %d above the limit", n.nlink)
	case n.nlink > 1:
		c.links[n]++
		if c.links[n] > 1 {
			return // checked at its first name
		}
	}
	c.node(n, p)
}

func (c *checker) node(n *inode, p string) {
	if n.ino() == 0 || n.ino() >= c.ns.nextInode || !c.inodes.add(n.ino()) {
		c.fail(p, "inode number %d reused or out of range", n.ino())
	}
	if !n.isDir() && n.ext() != nil && n.ext().parent != nil {
		c.fail(p, "a non-directory with a parent")
	}
	if n.dead() != c.inTrash {
		c.fail(p, "marked dead %v, in the trash %v", n.dead(), c.inTrash)
	}
	c.xattrs(n, p)
	switch {
	case n.isDir():
		c.dirs++
		c.dir(n, p)
	case n.isSymlink():
		c.files++
		c.bytes += n.length
		if n.ext() == nil || n.length != int64(len(n.ext().target)) || n.chunks() != nil {
			c.fail(p, "bad symbolic link")
		}
	case n.isDevice():
		c.files++
		if n.ext() == nil || n.ext().target != "" || n.ext().kids.Len() != 0 || n.length != 0 || n.chunks() != nil || !validSpecial(n.mode) {
			c.fail(p, "bad device node")
		}
	default:
		c.files++
		c.bytes += n.length
		c.file(n, p)
	}
}

func (c *checker) dir(n *inode, p string) {
	if n.ext() == nil || n.chunks() != nil || n.length != 0 {
		c.fail(p, "bad directory")
		return
	}
	prev, count, dirs := "", 0, 0
	for _, blk := range n.ext().kids.blocks {
		if len(blk.ents) == 0 {
			c.fail(p, "empty block")
		}
		for i, e := range blk.ents {
			count++
			name := blk.name(i)
			if name <= prev || pathProblem("/"+name) != "" {
				c.fail(p, "entry %q unsorted or invalid", name)
			}
			if e.n == nil || e.n.isDir() && (e.n.ext() == nil || e.n.ext().parent != n) {
				c.fail(p, "entry %q has no inode or a wrong parent", name)
				return
			}
			prev = name
			if e.n.isDir() {
				dirs++
			}
			c.entry(e.n, join(p, name))
			if c.err != nil {
				return
			}
		}
	}
	if count != n.ext().kids.Len() {
		c.fail(p, "holds %d entries, counted %d", count, n.ext().kids.Len())
	}
	if dirs != n.ext().kids.Dirs() {
		c.fail(p, "holds %d directories, counted %d", dirs, n.ext().kids.Dirs())
	}
}

// xattrs checks an inode's extended attributes: valid names, sorted,
// bounded, and an ext held by a file only for them.
func (c *checker) xattrs(n *inode, p string) {
	xs := n.xattrs()
	for i, x := range xs {
		if checkXattrName("check", p, x.name) != nil || len(x.value) > MaxXattrValue || x.value == nil ||
			i > 0 && x.name <= xs[i-1].name {
			c.fail(p, "bad extended attribute %q", x.name)
		}
	}
	if xattrBytes(xs) > MaxXattrTotal {
		c.fail(p, "extended attributes larger than %d bytes", MaxXattrTotal)
	}
	if n.ext() != nil && xs != nil && len(xs) == 0 {
		c.fail(p, "empty attribute list kept")
	}
}

func (c *checker) file(n *inode, p string) {
	if n.ext() != nil && (n.ext().kids.Len() != 0 || n.ext().target != "" || n.ext().rdev != 0 || len(n.ext().xattrs) == 0) {
		c.fail(p, "bad file fields")
	}
	if n.length < 0 || n.repl() > chunkfs.MaxReplication {
		c.fail(p, "bad file fields")
	}
	if n.isSpecial() && (n.length != 0 || n.chunks() != nil || !validSpecial(n.mode)) {
		c.fail(p, "bad fifo or socket")
	}
	if k := len(n.chunks()); k > 0 && n.chunks()[k-1].handle == 0 {
		c.fail(p, "trailing hole in the chunk list")
	}
	for i, r := range n.chunks() {
		if r.handle == 0 {
			continue
		}
		switch {
		case r.handle >= c.ns.nextHandle:
			c.fail(p, "chunk %d: handle %d not below the counter %d", i, r.handle, c.ns.nextHandle)
		case !c.ns.holds(r.handle, n):
			c.fail(p, "chunk %d: handle %d missing from the index", i, r.handle)
		case r.version < 1:
			c.fail(p, "chunk %d: version 0", i)
		}
		// Every reference is recorded for its file; a shared chunk's
		// references must add up to its count (checkRefs), and the
		// distinct chunks to the index's size.
		if c.ns.handles.isShared(r.handle) {
			if v, seen := c.ns.ChunkVersion(r.handle); seen && v != r.version {
				c.fail(p, "chunk %d: version %d, another holder has %d", r.handle, r.version, v)
			}
			c.refs[r.handle]++
		} else {
			c.chunks++
		}
		c.held++
	}
}

// checkRefs verifies every chunk's reference count against the
// references the tree holds: the index and the shared lists must name
// exactly the chunks seen, each with as many holders as inodes hold it.
func (c *checker) checkRefs() {
	c.chunks += int64(len(c.refs))
	for h, k := range c.refs {
		if got := c.ns.Refs(h); got != k {
			c.fail("/", "chunk %d: reference count %d, held by %d inodes", h, got, k)
			return
		}
	}
	lists := 0
	c.ns.handles.eachShared(func(h chunkfs.Handle, hs []*inode) {
		lists++
		if len(hs) < 2 || c.refs[h] != len(hs) || !c.ns.handles.isShared(h) {
			c.fail("/", "chunk %d: shared list of %d holders, %d in the tree", h, len(hs), c.refs[h])
		}
	})
	if lists != c.ns.handles.shared || lists != len(c.refs) {
		c.fail("/", "%d shared lists, %d counted, %d shared chunks in the tree", lists, c.ns.handles.shared, len(c.refs))
	}
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}
