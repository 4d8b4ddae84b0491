package fusefs

import (
	"context"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/locks"
)

// memBackend is an in-memory twin of a cluster, for running the POSIX
// suite against the FUSE layer alone. Like the master it checks names and
// kinds; permission checks are left to the kernel (default_permissions).
type memBackend struct {
	mu    sync.Mutex // guards every field and every memNode
	nodes map[string]*memNode
	next  uint64
	// failWrites, when set, makes every WriteAt fail with it.
	failWrites error
	locks      *locks.Table     // created on first use
	stats      atomic.Int64     // Stat calls
	statted    map[string]int64 // Stat calls by path, guarded by mu
}

type memNode struct {
	fi     chunkfs.FileInfo
	data   []byte
	xattrs map[string][]byte
}

func newMemBackend() *memBackend {
	b := &memBackend{nodes: map[string]*memNode{}, next: 2}
	now := time.Now()
	b.nodes["/"] = &memNode{fi: chunkfs.FileInfo{Inode: 1, FileName: "/", FileMode: fs.ModeDir | 0o755, MTime: now, ATime: now, CTime: now}}
	return b
}

func (b *memBackend) getLocked(op, p string) (*memNode, error) {
	n, ok := b.nodes[p]
	if !ok {
		dir := path.Dir(p)
		for dir != "/" {
			if d, ok := b.nodes[dir]; ok && !d.fi.IsDir() {
				return nil, chunkfs.E(op, p, chunkfs.KindNotDir, "")
			}
			dir = path.Dir(dir)
		}
		return nil, chunkfs.E(op, p, chunkfs.KindNotExist, "")
	}
	return n, nil
}

// statsOf returns how many Stat calls asked for p.
func (b *memBackend) statsOf(p string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.statted[p]
}

func (b *memBackend) Stat(ctx context.Context, c chunkfs.Caller, p string) (*chunkfs.FileInfo, error) {
	b.stats.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.statted == nil {
		b.statted = map[string]int64{}
	}
	b.statted[p]++
	n, err := b.getLocked("stat", p)
	if err != nil {
		return nil, err
	}
	return b.infoLocked(p, n), nil
}

// infoLocked describes node n at p, counting links as the cluster does:
// a file's names (one node at several paths), a directory's
// subdirectories.
func (b *memBackend) infoLocked(p string, n *memNode) *chunkfs.FileInfo {
	fi := n.fi
	fi.FileName = path.Base(p)
	fi.Nlink = 0
	for _, k := range b.nodes {
		if k == n {
			fi.Nlink++
		}
	}
	if fi.IsDir() {
		fi.Nlink = 2
		for q, k := range b.nodes {
			if q != "/" && path.Dir(q) == p && k.fi.IsDir() {
				fi.Nlink++
			}
		}
	}
	return &fi
}

func (b *memBackend) ReadDir(ctx context.Context, c chunkfs.Caller, p string) ([]*chunkfs.FileInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, err := b.getLocked("readdir", p)
	if err != nil {
		return nil, err
	}
	if !d.fi.IsDir() {
		return nil, chunkfs.E("readdir", p, chunkfs.KindNotDir, "")
	}
	var out []*chunkfs.FileInfo
	for q, n := range b.nodes {
		if q != "/" && path.Dir(q) == p {
			out = append(out, b.infoLocked(q, n))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FileName < out[j].FileName })
	return out, nil
}

// addLocked makes a node at p after checking its parent.
func (b *memBackend) addLocked(op, p string, mode fs.FileMode, c chunkfs.Caller) (*memNode, error) {
	parent, err := b.getLocked(op, path.Dir(p))
	if err != nil {
		return nil, err
	}
	if !parent.fi.IsDir() {
		return nil, chunkfs.E(op, p, chunkfs.KindNotDir, "")
	}
	if _, ok := b.nodes[p]; ok {
		return nil, chunkfs.E(op, p, chunkfs.KindExist, "")
	}
	now := time.Now()
	n := &memNode{fi: chunkfs.FileInfo{Inode: b.next, FileName: path.Base(p), FileMode: mode, UID: c.UID, GID: c.GIDs[0], MTime: now, ATime: now, CTime: now}}
	b.next++
	b.nodes[p] = n
	parent.fi.MTime, parent.fi.CTime = now, now
	return n, nil
}

func (b *memBackend) Mkdir(ctx context.Context, c chunkfs.Caller, p string, perm fs.FileMode) (*chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.addLocked("mkdir", p, fs.ModeDir|perm, c)
	if err != nil {
		return nil, nil, err
	}
	return b.infoLocked(p, n), b.parentLocked(p), nil
}

// parentLocked describes p's parent directory, or nil.
func (b *memBackend) parentLocked(p string) *chunkfs.FileInfo {
	dir, err := b.getLocked("parent", path.Dir(p))
	if err != nil {
		return nil
	}
	return b.infoLocked(path.Dir(p), dir)
}

func (b *memBackend) Create(ctx context.Context, c chunkfs.Caller, p string, perm fs.FileMode, excl, trunc bool, at time.Time) (File, *chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.addLocked("create", p, perm, c)
	if err == nil && !at.IsZero() {
		n.fi.MTime, n.fi.ATime = at, at
	}
	if chunkfs.KindOf(err) == chunkfs.KindExist && !excl {
		n, err = b.nodes[p], nil
		if n.fi.IsDir() {
			return nil, nil, nil, chunkfs.E("create", p, chunkfs.KindIsDir, "")
		}
		if trunc {
			n.data, n.fi.Length = nil, 0
		}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return &memFile{b: b, path: p}, b.infoLocked(p, n), b.parentLocked(p), nil
}

func (b *memBackend) Open(ctx context.Context, c chunkfs.Caller, p string, write bool) (File, *chunkfs.FileInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.getLocked("open", p)
	if err != nil {
		return nil, nil, err
	}
	if n.fi.IsDir() && write {
		return nil, nil, chunkfs.E("open", p, chunkfs.KindIsDir, "")
	}
	return &memFile{b: b, path: p}, b.infoLocked(p, n), nil
}

func (b *memBackend) Remove(ctx context.Context, c chunkfs.Caller, p string) (*chunkfs.FileInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.getLocked("remove", p)
	if err != nil {
		return nil, err
	}
	if n.fi.IsDir() && b.hasChildrenLocked(p) {
		return nil, chunkfs.E("remove", p, chunkfs.KindNotEmpty, "")
	}
	delete(b.nodes, p)
	b.changedLocked(path.Dir(p))
	n.fi.CTime = time.Now() // its other names, if any, see it
	if dir, err := b.getLocked("remove", path.Dir(p)); err == nil {
		return b.infoLocked(path.Dir(p), dir), nil
	}
	return nil, nil
}

func (b *memBackend) Link(ctx context.Context, c chunkfs.Caller, oldpath, newpath string) (*chunkfs.FileInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.getLocked("link", oldpath)
	if err != nil {
		return nil, err
	}
	parent, err := b.getLocked("link", path.Dir(newpath))
	switch {
	case err != nil:
		return nil, err
	case !parent.fi.IsDir():
		return nil, chunkfs.E("link", newpath, chunkfs.KindNotDir, "")
	case b.nodes[newpath] != nil:
		return nil, chunkfs.E("link", newpath, chunkfs.KindExist, "")
	case n.fi.IsDir():
		return nil, chunkfs.E("link", oldpath, chunkfs.KindPermission, "a directory")
	}
	b.nodes[newpath] = n
	now := time.Now()
	n.fi.CTime, parent.fi.MTime = now, now
	return b.infoLocked(newpath, n), nil
}

func (b *memBackend) hasChildrenLocked(p string) bool {
	for q := range b.nodes {
		if q != "/" && path.Dir(q) == p {
			return true
		}
	}
	return false
}

func (b *memBackend) Rename(ctx context.Context, c chunkfs.Caller, src, dst string, how RenameHow) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.getLocked("rename", src)
	if err != nil {
		return err
	}
	if b.nodes[dst] == n {
		return nil // one file's two names: rename(2) does nothing
	}
	if strings.HasPrefix(dst, src+"/") {
		return chunkfs.E("rename", src, chunkfs.KindInvalid, "into itself")
	}
	if _, err := b.getLocked("rename", path.Dir(dst)); err != nil {
		return err
	}
	if how == RenameExchange {
		return b.exchangeLocked(src, dst)
	}
	if old, ok := b.nodes[dst]; ok {
		switch {
		case how == RenameNoReplace:
			return chunkfs.E("rename", dst, chunkfs.KindExist, "")
		case old.fi.IsDir() && !n.fi.IsDir():
			return chunkfs.E("rename", dst, chunkfs.KindIsDir, "")
		case !old.fi.IsDir() && n.fi.IsDir():
			return chunkfs.E("rename", dst, chunkfs.KindNotDir, "")
		case old.fi.IsDir() && b.hasChildrenLocked(dst):
			return chunkfs.E("rename", dst, chunkfs.KindNotEmpty, "")
		}
	}
	b.moveLocked(b.takeLocked(src), src, dst)
	n.fi.FileName = path.Base(dst)
	n.fi.CTime = time.Now()
	b.changedLocked(path.Dir(src))
	b.changedLocked(path.Dir(dst))
	return nil
}

// changedLocked records a change of directory p's entries in its times.
func (b *memBackend) changedLocked(p string) {
	if d := b.nodes[p]; d != nil {
		now := time.Now()
		d.fi.MTime, d.fi.CTime = now, now
	}
}

// exchangeLocked swaps the trees at a and b.
func (b *memBackend) exchangeLocked(a, bp string) error {
	na, nb := b.nodes[a], b.nodes[bp]
	if nb == nil {
		return chunkfs.E("rename", bp, chunkfs.KindNotExist, "")
	}
	if strings.HasPrefix(a, bp+"/") {
		return chunkfs.E("rename", a, chunkfs.KindInvalid, "below the other")
	}
	ta, tb := b.takeLocked(a), b.takeLocked(bp)
	b.moveLocked(ta, a, bp)
	b.moveLocked(tb, bp, a)
	na.fi.FileName, nb.fi.FileName = path.Base(bp), path.Base(a)
	return nil
}

// takeLocked removes the tree at p and returns it by path.
func (b *memBackend) takeLocked(p string) map[string]*memNode {
	t := map[string]*memNode{}
	for q, m := range b.nodes {
		if q == p || strings.HasPrefix(q, p+"/") {
			t[q] = m
			delete(b.nodes, q)
		}
	}
	return t
}

// moveLocked puts tree t, taken from src, at dst.
func (b *memBackend) moveLocked(t map[string]*memNode, src, dst string) {
	for q, m := range t {
		b.nodes[dst+strings.TrimPrefix(q, src)] = m
	}
}

func (b *memBackend) SetAttr(ctx context.Context, c chunkfs.Caller, p string, a SetAttr) (*chunkfs.FileInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.getLocked("setattr", p)
	if err != nil {
		return nil, err
	}
	if a.Perm != nil {
		n.fi.FileMode = n.fi.FileMode.Type() | *a.Perm
	}
	if a.UID != nil {
		n.fi.UID = *a.UID
	}
	if a.GID != nil {
		n.fi.GID = *a.GID
	}
	if a.ATime != nil {
		n.fi.ATime = *a.ATime
	}
	if a.MTime != nil {
		n.fi.MTime = *a.MTime
	}
	if a.Size != nil {
		if n.fi.IsDir() {
			return nil, chunkfs.E("truncate", p, chunkfs.KindIsDir, "")
		}
		n.resize(*a.Size)
	}
	n.fi.CTime = time.Now()
	return b.infoLocked(p, n), nil
}

func (n *memNode) resize(size int64) {
	if size <= int64(len(n.data)) {
		n.data = n.data[:size]
	} else {
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
	n.fi.Length = size
	n.fi.MTime = time.Now()
	n.fi.CTime = n.fi.MTime
}

func (b *memBackend) Symlink(ctx context.Context, c chunkfs.Caller, target, p string) (*chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.addLocked("symlink", p, fs.ModeSymlink|0o777, c)
	if err != nil {
		return nil, nil, err
	}
	n.fi.Target = target
	return b.infoLocked(p, n), b.parentLocked(p), nil
}

func (b *memBackend) Mknod(ctx context.Context, c chunkfs.Caller, p string, mode fs.FileMode, dev uint32) (*chunkfs.FileInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.addLocked("mknod", p, mode, c)
	if err != nil {
		return nil, err
	}
	n.fi.Rdev = dev
	return b.infoLocked(p, n), nil
}

func (b *memBackend) Readlink(ctx context.Context, c chunkfs.Caller, p string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.getLocked("readlink", p)
	if err != nil {
		return "", err
	}
	if n.fi.FileMode&fs.ModeSymlink == 0 {
		return "", chunkfs.E("readlink", p, chunkfs.KindInvalid, "")
	}
	return n.fi.Target, nil
}

func (b *memBackend) Usage(ctx context.Context) (Usage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Usage{Capacity: 1 << 40, Used: 1 << 30, Free: 1<<40 - 1<<30, Files: int64(len(b.nodes))}, nil
}

// memFile reads and writes a memNode by path, as the client does.
type memFile struct {
	b    *memBackend
	path string
}

func (f *memFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	n, err := f.b.getLocked("read", f.path)
	if err != nil {
		return 0, err
	}
	if off >= int64(len(n.data)) {
		return 0, io.EOF
	}
	k := copy(p, n.data[off:])
	if k < len(p) {
		return k, io.EOF
	}
	return k, nil
}

func (f *memFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	if f.b.failWrites != nil {
		return 0, f.b.failWrites
	}
	n, err := f.b.getLocked("write", f.path)
	if err != nil {
		return 0, err
	}
	if end := off + int64(len(p)); end > int64(len(n.data)) {
		n.resize(end)
	}
	copy(n.data[off:], p)
	n.fi.MTime = time.Now()
	n.fi.CTime = n.fi.MTime
	return len(p), nil
}

func (f *memFile) Sync(ctx context.Context) error { return nil }
func (f *memFile) Close() error                   { return nil }

func (f *memFile) Moved(path string) error {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	f.path = path
	return nil
}

func (b *memBackend) GetXattr(ctx context.Context, c chunkfs.Caller, p, name string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.getLocked("getxattr", p)
	if err != nil {
		return nil, err
	}
	v, ok := n.xattrs[name]
	if !ok {
		return nil, chunkfs.E("getxattr", p, chunkfs.KindNoAttr, "")
	}
	return slices.Clone(v), nil
}

func (b *memBackend) ListXattr(ctx context.Context, c chunkfs.Caller, p string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.getLocked("listxattr", p)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(n.xattrs)), nil
}

func (b *memBackend) SetXattr(ctx context.Context, c chunkfs.Caller, p, name string, value []byte, flags uint32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.getLocked("setxattr", p)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(name, "user.") && !strings.HasPrefix(name, "trusted.") && !strings.HasPrefix(name, "security.") {
		return chunkfs.E("setxattr", p, chunkfs.KindNotSupported, "")
	}
	_, ok := n.xattrs[name]
	switch {
	case ok && flags&xattrCreate != 0:
		return chunkfs.E("setxattr", p, chunkfs.KindExist, "")
	case !ok && flags&xattrReplace != 0:
		return chunkfs.E("setxattr", p, chunkfs.KindNoAttr, "")
	}
	if n.xattrs == nil {
		n.xattrs = map[string][]byte{}
	}
	n.xattrs[name] = slices.Clone(value)
	return nil
}

func (b *memBackend) RemoveXattr(ctx context.Context, c chunkfs.Caller, p, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.getLocked("removexattr", p)
	if err != nil {
		return err
	}
	if _, ok := n.xattrs[name]; !ok {
		return chunkfs.E("removexattr", p, chunkfs.KindNoAttr, "")
	}
	delete(n.xattrs, name)
	return nil
}

// The twin keeps locks in a table of its own, as the leader does.
func (b *memBackend) lockTable() *locks.Table {
	if b.locks == nil {
		b.locks = locks.New(time.Minute, 0, time.Now(), 0)
	}
	return b.locks
}

func (b *memBackend) LockSession(ctx context.Context, session uint64, reclaim, close bool) (uint64, time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.lockTable()
	switch {
	case close:
		t.Close(session)
		return session, t.TTL(), nil
	case session == 0:
		id, err := t.Open(time.Now())
		return id, t.TTL(), err
	case !t.Renew(session, reclaim, time.Now()):
		return 0, 0, chunkfs.E("lock session", "", chunkfs.KindNotExist, "")
	}
	return session, t.TTL(), nil
}

func (b *memBackend) Lock(ctx context.Context, c chunkfs.Caller, p string, ino uint64, l locks.Lock, unlock, test, reclaim bool) (bool, locks.Lock, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.lockTable()
	switch {
	case unlock:
		return true, locks.Lock{}, t.Unlock(ino, l.Owner, l.Kind, l.Start, l.End)
	case test:
		h, ok := t.Test(ino, l)
		return !ok, h, nil
	}
	h, err := t.Set(ino, l, reclaim, time.Now())
	if err != nil {
		return false, locks.Lock{}, chunkfs.E("lock", p, chunkfs.KindInvalid, err.Error())
	}
	return h == (locks.Lock{}), h, nil
}
