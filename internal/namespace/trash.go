package namespace

import (
	"slices"
	"unsafe"

	"github.com/chunkfs/chunkfs"
)

// Trash limits.
const (
	// MaxTrashPeriod bounds the grace period: ten years.
	MaxTrashPeriod = 10 * 365 * 24 * 3600 * int64(1e9)
	// MaxPurge is the most trash entries one OpPurgeTrash frees, so that
	// one log entry stays short; the master logs more while some are due.
	MaxPurge = 1000
)

// The trash holds what was deleted while the grace period is above zero:
// each entry is a file or a whole tree taken out of the directory tree,
// with the path it had, when and by whom it was deleted. It is not in the
// tree: no path leads into it, so ordinary lookups and listings never see
// it. Its inodes keep their chunks (in the handle index, so chunkservers
// keep the replicas) until the entry is purged, which frees them through
// the same path as a delete (unlinked). An inode is wholly live or wholly
// in one entry: a file in a deleted tree that keeps a name outside it
// loses its names inside the tree at once.
type trashBin struct {
	entries []trashEntry // by ID, ascending (the order they were deleted in)
	// paths holds the entries' paths end to end (trashEntry.path): bytes
	// are only appended, never written over, so a path handed out or a
	// checkpoint's frozen view stays as it was; with half its bytes dead
	// it is copied without them (dropPath).
	paths     []byte
	deadPaths int // bytes of paths no entry uses
	nextID    uint64
	period    int64  // the grace period, ns; 0: deleting deletes at once
	dead      Counts // the sum of the entries' counts
}

// trashEntry is one deleted file or tree. The entry counts as a name of
// its inode (nlink), as a directory entry would. It is kept by value, in
// 56 bytes: what it holds is counted in 32 bits but for the bytes (a tree
// of 2^32 inodes would not fit the master's memory), and its path is a
// place in trashBin.paths (48 bits) and a length.
type trashEntry struct {
	node  *inode
	id    uint64
	time  int64  // when it was deleted, Unix ns
	bytes int64  // the bytes it holds
	uid   uint32 // who deleted it
	// The files, directories and chunks it holds.
	files, dirs, chunks uint32
	atLo                uint32 // where its path starts in paths (at)
	atHi                uint16
	size                uint16 // its path's length, at most chunkfs.MaxPathLen
}

func (e *trashEntry) at() int { return int(e.atHi)<<32 | int(e.atLo) }

// path returns where e was deleted from, a view of paths, the bin's
// paths or a frozen copy of them.
func (e *trashEntry) path(paths []byte) string {
	return unsafe.String(&paths[e.at()], int(e.size))
}

// add appends e, deleted from p, to the trash. The paths grow by an
// eighth when full.
func (t *trashBin) add(e trashEntry, p string) {
	if len(t.paths)+len(p) > cap(t.paths) {
		grown := make([]byte, len(t.paths), len(t.paths)+len(t.paths)/8+len(p))
		copy(grown, t.paths)
		t.paths = grown
	}
	e.atLo, e.atHi, e.size = uint32(len(t.paths)), uint16(len(t.paths)>>32), uint16(len(p))
	t.paths = append(t.paths, p...)
	t.entries = append(t.entries, e)
}

// path returns entry i's path.
func (t *trashBin) path(i int) string { return t.entries[i].path(t.paths) }

// dropPath counts the path of an entry that left the trash as dead, and
// copies the live ones to a new array once half the bytes are dead.
func (t *trashBin) dropPath(e *trashEntry) {
	t.deadPaths += int(e.size)
	if t.deadPaths <= len(t.paths)/2 {
		return
	}
	old := t.paths
	t.paths, t.deadPaths = nil, 0
	size := 0
	for i := range t.entries {
		size += int(t.entries[i].size)
	}
	if size > 0 {
		t.paths = make([]byte, 0, size)
	}
	for i := range t.entries {
		e := &t.entries[i]
		p := e.path(old)
		e.atLo, e.atHi = uint32(len(t.paths)), uint16(len(t.paths)>>32)
		t.paths = append(t.paths, p...)
	}
}

// sum returns what e holds.
func (e *trashEntry) sum() Counts {
	return Counts{Files: int64(e.files), Dirs: int64(e.dirs), Chunks: int64(e.chunks), Bytes: e.bytes}
}

// setSum records c as what e holds.
func (e *trashEntry) setSum(c Counts) {
	e.files, e.dirs, e.chunks, e.bytes = uint32(c.Files), uint32(c.Dirs), uint32(c.Chunks), c.Bytes
}

// TrashEntry describes one entry of the trash.
type TrashEntry struct {
	ID      uint64
	Path    string // where it was deleted from
	Time    int64  // deletion time, Unix ns
	Expires int64  // when the master purges it, Unix ns
	UID     uint32 // who deleted it
	Info    chunkfs.FileInfo
	Counts  Counts // what it holds
}

// TrashPeriod returns the grace period in ns; 0: deleting deletes at once.
func (ns *Namespace) TrashPeriod() int64 { return ns.trash.period }

// DeadCounts returns what the trash holds: dead files, directories,
// chunks and bytes.
func (ns *Namespace) DeadCounts() Counts { return ns.trash.dead }

// TrashDue reports whether some entry's grace period has passed at now.
func (ns *Namespace) TrashDue(now int64) bool {
	return len(ns.trash.entries) > 0 && ns.expired(&ns.trash.entries[0], now)
}

func (ns *Namespace) expired(e *trashEntry, now int64) bool {
	return e.time <= now-ns.trash.period
}

// mayUndelete reports whether c may see, undelete or purge e: the
// superuser, who deleted it, and the owner of what it holds.
func mayUndelete(c *chunkfs.Caller, e *trashEntry) bool {
	return isRoot(c) || c.UID == e.uid || c.UID == e.node.uid
}

// Trash returns, in deletion order, up to limit (0: MaxListLimit) of the
// entries after ID after that c may see.
func (ns *Namespace) Trash(c chunkfs.Caller, after uint64, limit int) (page []TrashEntry, more bool) {
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	i, _ := slices.BinarySearchFunc(ns.trash.entries, after+1, func(e trashEntry, id uint64) int {
		return cmpUint(e.id, id)
	})
	es := ns.trash.entries[i:]
	for k := range es {
		e := &es[k]
		if !mayUndelete(&c, e) {
			continue
		}
		if len(page) == limit {
			return page, true
		}
		p := e.path(ns.trash.paths)
		page = append(page, TrashEntry{ID: e.id, Path: p, Time: e.time, Expires: e.time + ns.trash.period,
			UID: e.uid, Info: e.node.info(base(p)), Counts: e.sum()})
	}
	return page, false
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// trashDelete deletes c.Path into the trash, or at once when the grace
// period is 0 (as OpDelete).
func (ns *Namespace) trashDelete(c *Command) Result {
	const op = "delete"
	parent, n, err := ns.deletable(op, c)
	if err != nil {
		return Result{Err: err}
	}
	name := base(c.Path)
	if ns.trash.period == 0 {
		return Result{Garbage: ns.removeTree(parent, name, n, c.Time)}
	}
	info := n.info(name)
	return Result{Info: info, Trashed: ns.toTrash(c, c.Path, parent, name, n)}
}

// toTrash removes the entry name (at path p), which names n, from dir and
// puts n into the trash if that was its last name. It returns the new
// entry's ID, 0 when n keeps another name.
func (ns *Namespace) toTrash(c *Command, p string, dir *inode, name string, n *inode) uint64 {
	ns.detach(dir, name, n, c.Time) // touches n
	n.ctime = c.Time
	if n.nlink > 0 {
		return 0 // a hard link: the file lives on under its other names
	}
	if n.isDir() {
		ns.dropOutsideLinks(n, c.Time)
	}
	sum := ns.treeCounts(n)
	ns.markDead(n, true)
	n.nlink = 1 // the entry names it
	ns.trash.nextID++
	e := trashEntry{node: n, id: ns.trash.nextID, time: c.Time, uid: c.Caller.UID}
	e.setSum(sum)
	ns.trash.add(e, p)
	ns.moveCounts(sum, -1)
	return e.id
}

// markDead marks every inode of the tree at n as in the trash or not:
// the repair of a chunk only deleted files hold waits behind live files'
// (ChunkFile). An inode is never both live and in the trash
// (dropOutsideLinks), so the tree's inodes are all of one kind.
func (ns *Namespace) markDead(n *inode, dead bool) {
	if n.dead() != dead {
		ns.touch(n)
		n.setDead(dead)
	}
	if n.isDir() {
		n.ext().kids.all(func(_ string, k *inode) bool {
			ns.markDead(k, dead)
			return true
		})
	}
}

// moveCounts moves sum from the live counts to the dead (sign -1) or back
// (sign +1).
func (ns *Namespace) moveCounts(sum Counts, sign int64) {
	ns.files += sign * sum.Files
	ns.dirs += sign * sum.Dirs
	ns.bytes += sign * sum.Bytes
	d := &ns.trash.dead
	d.Files -= sign * sum.Files
	d.Dirs -= sign * sum.Dirs
	d.Bytes -= sign * sum.Bytes
	d.Chunks -= sign * sum.Chunks
}

// linkRef is one directory entry naming an inode with several names.
type linkRef struct {
	dir  *inode
	name string
}

// dropOutsideLinks removes, from the tree below d, the entries of files
// that also have names outside it: such a file is not deleted, and an
// inode is never both live and in the trash.
func (ns *Namespace) dropOutsideLinks(d *inode, now int64) {
	refs := map[*inode][]linkRef{}
	var walk func(d *inode)
	walk = func(d *inode) {
		d.ext().kids.all(func(name string, k *inode) bool {
			switch {
			case k.isDir():
				walk(k)
			case k.nlink > 1:
				refs[k] = append(refs[k], linkRef{d, name})
			}
			return true
		})
	}
	walk(d)
	for k, rs := range refs {
		if len(rs) == int(k.nlink) {
			continue
		}
		for _, r := range rs {
			ns.detach(r.dir, r.name, k, now) // touches k
		}
		k.ctime = now
	}
}

// treeCounts counts the inodes and bytes of the tree at n, an inode with
// several names once, and the chunks only the tree holds: a chunk a
// snapshot shares with a file outside it stays live. (Restore counts an
// entry's chunks the same way: those no earlier part of the state holds.)
func (ns *Namespace) treeCounts(n *inode) Counts {
	var sum Counts
	in := map[*inode]bool{}
	var shared []chunkfs.Handle
	var walk func(n *inode)
	walk = func(n *inode) {
		if in[n] {
			return
		}
		in[n] = true
		for _, r := range n.chunks() {
			switch {
			case r.handle == 0:
			case ns.handles.isShared(r.handle):
				shared = append(shared, r.handle)
			default:
				sum.Chunks++
			}
		}
		if !n.isDir() {
			sum.Files++
			sum.Bytes += n.length
			return
		}
		sum.Dirs++
		n.ext().kids.all(func(_ string, k *inode) bool {
			walk(k)
			return true
		})
	}
	walk(n)
	slices.Sort(shared)
	for _, h := range slices.Compact(shared) {
		inside := true
		ns.holders(h, func(k *inode) { inside = inside && in[k] })
		if inside {
			sum.Chunks++
		}
	}
	return sum
}

// findTrash returns the entry c names, and its index: by ID, or the
// newest deleted from c.Path that the caller may see.
func (ns *Namespace) findTrash(op string, c *Command) (int, trashEntry, error) {
	es := ns.trash.entries
	if c.Index != 0 {
		i, ok := slices.BinarySearchFunc(es, uint64(c.Index), func(e trashEntry, id uint64) int { return cmpUint(e.id, id) })
		if !ok || c.Path != "" && ns.trash.path(i) != c.Path {
			return 0, trashEntry{}, chunkfs.E(op, printable(c.Path), chunkfs.KindNotExist, "no such entry in the trash")
		}
		if !mayUndelete(&c.Caller, &es[i]) {
			return 0, trashEntry{}, permission(op, ns.trash.path(i), "only who deleted it, its owner or the superuser")
		}
		return i, es[i], nil
	}
	if err := ValidatePath(op, c.Path); err != nil {
		return 0, trashEntry{}, err
	}
	denied := false
	for i := len(es) - 1; i >= 0; i-- {
		if ns.trash.path(i) != c.Path {
			continue
		}
		if mayUndelete(&c.Caller, &es[i]) {
			return i, es[i], nil
		}
		denied = true
	}
	if denied {
		return 0, trashEntry{}, permission(op, c.Path, "only who deleted it, its owner or the superuser")
	}
	return 0, trashEntry{}, chunkfs.E(op, c.Path, chunkfs.KindNotExist, chunkfs.KindNotExist.String()+" in the trash")
}

// undelete brings a trash entry back, at its old path or at c.Target,
// making missing parents when FlagParents is set. A taken name, a missing
// parent without FlagParents, or missing permission changes nothing.
func (ns *Namespace) undelete(c *Command) Result {
	const op = "undelete"
	i, e, err := ns.findTrash(op, c)
	if err != nil {
		return Result{Err: err}
	}
	dst := c.Target
	if dst == "" {
		dst = ns.trash.path(i)
	}
	dp, dn, err := ns.resolve(op, &c.Caller, dst)
	if err == nil && dp == nil {
		return fail(op, dst, chunkfs.KindExist, "")
	}
	if err != nil && c.Flags&FlagParents != 0 && chunkfs.KindOf(err) == chunkfs.KindNotExist {
		dir, _ := split(dst)
		mk := &Command{Op: OpMkdir, Flags: FlagParents, Time: c.Time, Caller: c.Caller, Path: dir, Mode: 0o755}
		if r := ns.mkdir(mk); r.Err != nil {
			return r
		}
		dp, dn, err = ns.resolve(op, &c.Caller, dst)
	}
	switch {
	case err != nil:
		return Result{Err: err}
	case dn != nil:
		return fail(op, dst, chunkfs.KindExist, chunkfs.KindExist.String()+": the name is taken; undelete to another name")
	case !may(&c.Caller, dp, accessWrite|accessExec):
		return fail(op, dst, chunkfs.KindPermission, "")
	}
	ns.trash.entries = slices.Delete(ns.trash.entries, i, i+1)
	ns.trash.dropPath(&e)
	ns.moveCounts(e.sum(), +1)
	ns.markDead(e.node, false)
	ns.touch(e.node)
	e.node.nlink--
	e.node.ctime = c.Time
	ns.attach(dp, base(dst), e.node, c.Time)
	return Result{Info: e.node.info(base(dst))}
}

// purgeTrash frees the entries whose grace period has passed at c.Time
// (at most MaxPurge), or the one entry c.Index names, which the caller
// must be allowed to undelete.
func (ns *Namespace) purgeTrash(c *Command) Result {
	const op = "purge trash"
	var r Result
	if c.Index != 0 {
		i, e, err := ns.findTrash(op, c)
		if err != nil {
			return Result{Err: err}
		}
		ns.trash.entries = slices.Delete(ns.trash.entries, i, i+1)
		ns.trash.dropPath(&e)
		r.Garbage = ns.purge(&e, c.Time, nil)
		return r
	}
	k := 0
	for i := range ns.trash.entries {
		e := &ns.trash.entries[i]
		if k == MaxPurge || !ns.expired(e, c.Time) {
			break
		}
		r.Garbage = ns.purge(e, c.Time, r.Garbage)
		k++
	}
	gone := ns.trash.entries[:k]
	ns.trash.entries = ns.trash.entries[k:]
	for i := range gone {
		ns.trash.dropPath(&gone[i])
	}
	clear(gone)
	if len(ns.trash.entries) == 0 {
		ns.trash.entries = nil
	}
	return r
}

// purge frees entry e's tree through the path a delete takes, appending
// the chunks that became garbage.
func (ns *Namespace) purge(e *trashEntry, now int64, garbage []chunkfs.Handle) []chunkfs.Handle {
	ns.moveCounts(e.sum(), +1)
	ns.touch(e.node)
	e.node.nlink--
	return ns.unlinked(e.node, now, garbage)
}

func (ns *Namespace) setTrashPeriod(c *Command) Result {
	const op = "trash period"
	switch {
	case !isRoot(&c.Caller):
		return Result{Err: permission(op, "", "only the superuser may set the trash period")}
	case c.Length < 0 || c.Length > MaxTrashPeriod:
		return fail(op, "", chunkfs.KindInvalid, "trash period out of range [0, 10 years]")
	}
	ns.trash.period = c.Length
	return Result{}
}
