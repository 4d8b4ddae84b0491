package namespace

import (
	"io/fs"
	"strings"

	"github.com/chunkfs/chunkfs"
)

// Result is what applying a command produced.
type Result struct {
	Err       error            // a *chunkfs.Error; nothing changed when set
	Info      chunkfs.FileInfo // the inode the command concerned, after it
	Created   bool             // mkdir/create made a new inode
	Garbage   []chunkfs.Handle // chunks that no longer belong to any file
	Cut       *Cut             // a chunk a truncation cut in its middle
	Chunk     Chunk            // allocated or re-versioned chunk
	Allocated bool             // OpAllocChunk (or OpCreate with FlagFirstChunk) made a new chunk
	Trashed   uint64           // the ID of the trash entry OpTrash (or a rename's replaced file) made
}

// Cut is a chunk that a truncation shortened: its version was bumped and its
// replicas must be cut to Length bytes.
type Cut struct {
	Chunk
	Length int64
}

// Apply applies c and returns its result. It is deterministic: the result
// and the new state depend only on the state and c.
func (ns *Namespace) Apply(c *Command) Result {
	var r Result
	switch c.Op {
	case OpInit:
		r = ns.init(c)
	case OpMkdir:
		r = ns.mkdir(c)
	case OpCreate:
		r = ns.create(c)
	case OpRename:
		r = ns.rename(c)
	case OpDelete:
		r = ns.delete(c)
	case OpSetAttr:
		r = ns.setAttr(c)
	case OpAllocChunk:
		r = ns.allocChunk(c)
	case OpBumpVersion:
		r = ns.bumpVersion(c)
	case OpCommitLength:
		r = ns.commitLength(c)
	case OpLeaseHorizon:
		ns.leaseHorizon = max(ns.leaseHorizon, c.Horizon)
	case OpSetVersion:
		r = ns.setVersion(c)
	case OpSetXattr:
		r = ns.setXattr(c)
	case OpRemoveXattr:
		r = ns.removeXattr(c)
	case OpDecommission, OpRecommission:
		r = ns.decommission(c)
	case OpLink:
		r = ns.link(c)
	case OpSnapshot:
		r = ns.snapshot(c)
	case OpReserveHandle:
		r = ns.reserveHandle()
	case OpCopyChunk:
		r = ns.copyChunk(c)
	case OpTrash:
		r = ns.trashDelete(c)
	case OpUndelete:
		r = ns.undelete(c)
	case OpPurgeTrash:
		r = ns.purgeTrash(c)
	case OpTrashPeriod:
		r = ns.setTrashPeriod(c)
	case OpSafeMode:
		ns.safeMode(c)
	case OpClusterID:
		r = ns.setClusterID(c)
	case OpHoldBack:
		r = ns.holdBack(c)
	default:
		r.Err = chunkfs.E(c.Op.String(), "", chunkfs.KindInvalid, "unknown operation")
	}
	return r
}

// ApplyEncoded decodes and applies one encoded command.
func (ns *Namespace) ApplyEncoded(b []byte) Result {
	c, err := DecodeCommand(b)
	if err != nil {
		return Result{Err: chunkfs.E("apply", "", chunkfs.KindInvalid, err.Error())}
	}
	return ns.Apply(c)
}

func fail(op, p string, k chunkfs.Kind, msg string) Result {
	return Result{Err: chunkfs.E(op, p, k, msg)}
}

func (ns *Namespace) init(c *Command) Result {
	const op = "init"
	switch {
	case ns.Initialized():
		return fail(op, "", chunkfs.KindExist, "namespace already initialised")
	case c.ChunkSize < 1024 || c.ChunkSize > 1<<32:
		return fail(op, "", chunkfs.KindInvalid, "chunk size out of range [1 KiB, 4 GiB]")
	case c.Replication < 1 || c.Replication > chunkfs.MaxReplication:
		return fail(op, "", chunkfs.KindInvalid, "default replication out of range")
	}
	ns.chunkSize, ns.defaultRepl = c.ChunkSize, uint8(c.Replication)
	ns.touch(ns.root)
	ns.root.mtime, ns.root.atime, ns.root.ctime = c.Time, c.Time, c.Time
	return Result{Info: ns.root.info("/")}
}

// inodesLeft fails op on p when k more inodes would take numbers from
// MaxInode on.
func (ns *Namespace) inodesLeft(op, p string, k int) error {
	if ns.nextInode+uint64(k) > MaxInode {
		return chunkfs.E(op, p, chunkfs.KindNoSpace, "inode numbers used up")
	}
	return nil
}

// newInode makes an inode named name in dir for caller c, owned by c, with
// the group of dir when dir is setgid and c's primary group otherwise.
func (ns *Namespace) newInode(c *Command, dir *inode, name string, mode fs.FileMode) *inode {
	n := &inode{mode: mode, uid: c.Caller.UID, gid: primaryGID(&c.Caller)}
	n.setIno(ns.nextInode)
	ns.nextInode++
	if dir.mode&fs.ModeSetgid != 0 {
		n.gid = dir.gid
		if n.isDir() {
			n.mode |= fs.ModeSetgid
		} else if n.mode&(fs.ModeSetgid|0o010) == fs.ModeSetgid|0o010 && !inGroup(&c.Caller, n.gid) && !isRoot(&c.Caller) {
			n.mode &^= fs.ModeSetgid // as Linux: no setgid into a group the creator is not in
		}
	}
	n.mtime, n.atime, n.ctime = c.Time, c.Time, c.Time
	if n.isDir() || n.isSymlink() {
		n.setExt(&ext{})
	}
	if n.isDir() {
		ns.dirs++
	} else {
		ns.files++
	}
	ns.attach(dir, name, n, c.Time)
	return n
}

// attach adds the entry name → n to dir.
func (ns *Namespace) attach(dir *inode, name string, n *inode, now int64) {
	ns.touch(dir)
	ns.touch(n)
	dir.ext().kids.insert(name, n)
	dir.mtime, dir.ctime = now, now
	n.nlink++
	if n.isDir() {
		n.ext().parent = dir
	}
}

// detach removes the entry name, which names n, from dir. n lives on
// whatever its link count; the caller frees it (drop) when it should.
func (ns *Namespace) detach(dir *inode, name string, n *inode, now int64) {
	ns.touch(dir)
	ns.touch(n)
	dir.ext().kids.remove(name)
	dir.mtime, dir.ctime = now, now
	n.nlink--
	if n.isDir() {
		n.ext().parent = nil
	}
}

func (ns *Namespace) mkdir(c *Command) Result {
	const op = "mkdir"
	p := c.Path
	parent, n, err := ns.resolve(op, &c.Caller, p)
	if err != nil && !(c.Flags&FlagParents != 0 && chunkfs.KindOf(err) == chunkfs.KindNotExist) {
		return Result{Err: err}
	}
	if err == nil && n != nil {
		if c.Flags&FlagParents != 0 && n.isDir() {
			return Result{Info: n.info(base(p))}
		}
		return fail(op, p, chunkfs.KindExist, "")
	}
	if err == nil {
		if !may(&c.Caller, parent, accessWrite|accessExec) {
			return fail(op, p, chunkfs.KindPermission, "")
		}
		if err := ns.inodesLeft(op, p, 1); err != nil {
			return Result{Err: err}
		}
		name := base(p)
		n = ns.newInode(c, parent, name, fs.ModeDir|permBits(c.Mode))
		return Result{Info: n.info(name), Created: true}
	}
	return ns.mkdirParents(c)
}

// mkdirParents makes p and its missing parents, checking everything first
// so that a refusal changes nothing. Missing parents get mode|0300 so that
// their creator can fill them.
func (ns *Namespace) mkdirParents(c *Command) Result {
	const op = "mkdir"
	p := c.Path
	dir, rest := ns.root, p[1:]
	for {
		name, tail, _ := cutSlash(rest)
		next := dir.ext().kids.get(name)
		if next == nil {
			break
		}
		rest = tail
		if !next.isDir() {
			return fail(op, p, chunkfs.KindNotDir, "")
		}
		if !may(&c.Caller, next, accessExec) {
			return fail(op, p, chunkfs.KindPermission, "")
		}
		dir = next
	}
	if !may(&c.Caller, dir, accessWrite|accessExec) {
		return fail(op, p, chunkfs.KindPermission, "")
	}
	if err := ns.inodesLeft(op, p, strings.Count(rest, "/")+1); err != nil {
		return Result{Err: err}
	}
	return ns.makeChain(c, dir, rest)
}

// makeChain creates the directories named by rest (slash-separated, all
// missing) below the existing dir.
func (ns *Namespace) makeChain(c *Command, dir *inode, rest string) Result {
	for {
		name, tail, more := cutSlash(rest)
		mode := fs.ModeDir | permBits(c.Mode)
		if more {
			mode |= 0o300
		}
		next := ns.newInode(c, dir, name, mode)
		if !more {
			return Result{Info: next.info(name), Created: true}
		}
		dir, rest = next, tail
	}
}

func cutSlash(s string) (head, tail string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func (ns *Namespace) create(c *Command) Result {
	const op = "create"
	p := c.Path
	parent, n, err := ns.resolve(op, &c.Caller, p)
	if err != nil {
		return Result{Err: err}
	}
	if err := ns.checkNewFile(op, c); err != nil {
		return Result{Err: err}
	}
	if n != nil {
		return ns.createExisting(c, n)
	}
	if !may(&c.Caller, parent, accessWrite|accessExec) {
		return fail(op, p, chunkfs.KindPermission, "")
	}
	if fs.FileMode(c.Mode)&fs.ModeDevice != 0 && !isRoot(&c.Caller) {
		// As mknod(2) without CAP_MKNOD: a device node would open a
		// device on every machine that mounts the cluster with devices.
		return Result{Err: permission(op, p, "only the superuser may make a device node")}
	}
	if err := ns.inodesLeft(op, p, 1); err != nil {
		return Result{Err: err}
	}
	name := base(p)
	mode := permBits(c.Mode) | fs.FileMode(c.Mode)&specialTypes
	if c.Target != "" {
		mode = fs.ModeSymlink | 0o777
	}
	n = ns.newInode(c, parent, name, mode)
	if c.MTime != 0 { // the time the caller's create(2) was answered; ctime stays the log's
		n.atime, n.mtime = c.MTime, c.MTime
	}
	switch {
	case c.Target != "":
		n.ext().target = c.Target
		n.length = int64(len(c.Target))
		ns.bytes += n.length
	case n.isDevice():
		n.setExt(&ext{rdev: c.Rdev})
	case !n.isSpecial():
		n.setRepl(ns.replication(c.Replication))
	}
	r := Result{Created: true}
	ns.firstChunk(c, n, &r)
	r.Info = n.info(name)
	return r
}

// firstChunk allocates chunk 0 of regular file n, empty and without
// chunks, when c asks for it (FlagFirstChunk), noting it in r.
func (ns *Namespace) firstChunk(c *Command, n *inode, r *Result) {
	if c.Flags&FlagFirstChunk == 0 || !n.isFile() || n.length != 0 || len(n.chunks()) != 0 {
		return
	}
	r.Chunk, r.Allocated = ns.newChunk(n, 0), true
}

// checkNewFile validates a create command's arguments.
func (ns *Namespace) checkNewFile(op string, c *Command) error {
	switch {
	case c.Replication > chunkfs.MaxReplication:
		return chunkfs.E(op, c.Path, chunkfs.KindInvalid, "replication above the maximum")
	case len(c.Target) > chunkfs.MaxSymlinkLen:
		return chunkfs.E(op, c.Path, chunkfs.KindTooLarge, "symbolic link target too long")
	case containsNUL(c.Target):
		return chunkfs.E(op, c.Path, chunkfs.KindInvalid, "symbolic link target contains a NUL byte")
	case !validSpecial(fs.FileMode(c.Mode)) || fs.FileMode(c.Mode)&specialTypes != 0 && c.Target != "":
		return chunkfs.E(op, c.Path, chunkfs.KindInvalid, "one type: a fifo, a socket, a device or a symbolic link")
	case c.Rdev != 0 && fs.FileMode(c.Mode)&fs.ModeDevice == 0:
		return chunkfs.E(op, c.Path, chunkfs.KindInvalid, "a device number is for a device node only")
	}
	return nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// replication returns r, or the default for 0.
func (ns *Namespace) replication(r uint32) uint8 {
	if r == 0 {
		return ns.defaultRepl
	}
	return uint8(r)
}

// createExisting handles create on a path that exists.
func (ns *Namespace) createExisting(c *Command, n *inode) Result {
	const op = "create"
	switch {
	case c.Flags&FlagExclusive != 0 || c.Target != "":
		return fail(op, c.Path, chunkfs.KindExist, "")
	case n.isDir():
		return fail(op, c.Path, chunkfs.KindIsDir, "")
	case c.Flags&FlagTruncate == 0 || n.isSymlink():
		return Result{Info: n.info(base(c.Path))}
	case !may(&c.Caller, n, accessWrite):
		return fail(op, c.Path, chunkfs.KindPermission, "")
	}
	r := Result{Garbage: ns.truncate(n, 0, c.Time)}
	ns.firstChunk(c, n, &r)
	r.Info = n.info(base(c.Path))
	return r
}

// truncate sets a file's length; chunks wholly past the end become garbage
// (returned). A chunk cut in its middle is left to the caller.
func (ns *Namespace) truncate(n *inode, length, now int64) []chunkfs.Handle {
	ns.touch(n)
	var keep int64
	if ns.chunkSize > 0 {
		keep = (length + ns.chunkSize - 1) / ns.chunkSize
	}
	var garbage []chunkfs.Handle
	if keep < int64(len(n.chunks())) {
		for _, r := range n.chunks()[keep:] {
			if r.handle != 0 && ns.unref(r.handle, n) {
				garbage = append(garbage, r.handle)
			}
		}
		n.setChunks(trimChunks(n.chunks()[:keep]))
	}
	ns.bytes += length - n.length
	n.length = length
	n.mtime, n.ctime = now, now
	return garbage
}

// trimChunks drops trailing holes and gives back a slice's spare room.
func trimChunks(cs []chunkRef) []chunkRef {
	for len(cs) > 0 && cs[len(cs)-1].handle == 0 {
		cs = cs[:len(cs)-1]
	}
	if len(cs) == 0 {
		return nil
	}
	if cap(cs)-len(cs) > len(cs)/4 {
		cs = cloneChunks(cs)
	}
	return cs
}

// maxLength is the largest file length the namespace accepts.
func (ns *Namespace) maxLength() int64 { return ns.chunkSize * MaxFileChunks }

func (ns *Namespace) commitLength(c *Command) Result {
	const op = "commit length"
	n, err := ns.writable(op, c)
	if err != nil {
		return Result{Err: err}
	}
	if c.Length < 0 || c.Length > ns.maxLength() {
		return fail(op, c.Path, chunkfs.KindInvalid, "length out of range")
	}
	if c.MTime != 0 && !owns(&c.Caller, n) {
		// As utimensat(2): only the owner sets times of its choosing.
		return Result{Err: permission(op, c.Path, "only the owner may set times other than now")}
	}
	ns.touch(n)
	if c.Length > n.length {
		ns.bytes += c.Length - n.length
		n.length = c.Length
	}
	switch {
	case c.MTime != 0:
		n.mtime, n.ctime = c.MTime, c.Time
	case c.Flags&FlagTouch != 0:
		n.mtime, n.ctime = c.Time, c.Time
	}
	return Result{Info: n.info(base(c.Path))}
}

// writable resolves c.Path to a regular file c may write in an initialised
// namespace.
func (ns *Namespace) writable(op string, c *Command) (*inode, error) {
	if !ns.Initialized() {
		return nil, chunkfs.E(op, c.Path, chunkfs.KindUnavailable, "namespace not initialised")
	}
	_, n, err := ns.existing(op, &c.Caller, c.Path)
	if err != nil {
		return nil, err
	}
	if err := fileOnly(op, c.Path, n); err != nil {
		return nil, err
	}
	if !may(&c.Caller, n, accessWrite) {
		return nil, chunkfs.E(op, c.Path, chunkfs.KindPermission, "")
	}
	return n, nil
}

func (ns *Namespace) allocChunk(c *Command) Result {
	const op = "allocate chunk"
	n, err := ns.writable(op, c)
	if err != nil {
		return Result{Err: err}
	}
	i := c.Index
	if i < 0 || i >= MaxFileChunks {
		return fail(op, c.Path, chunkfs.KindInvalid, "chunk index out of range")
	}
	if c.Flags&FlagAppend != 0 {
		if last := int64(len(n.chunks())) - 1; i != last && i != last+1 && !(last < 0 && i == 0) {
			return fail(op, c.Path, chunkfs.KindStale, "append chunk index is neither the last chunk nor the next")
		}
	}
	if i < int64(len(n.chunks())) && n.chunks()[i].handle != 0 {
		r := n.chunks()[i]
		return Result{Info: n.info(base(c.Path)), Chunk: Chunk{Index: i, Handle: r.handle, Version: r.version}}
	}
	ch := ns.newChunk(n, i)
	return Result{Info: n.info(base(c.Path)), Chunk: ch, Allocated: true}
}

// newChunk allocates chunk i of file n, at version 1.
func (ns *Namespace) newChunk(n *inode, i int64) Chunk {
	ns.touch(n)
	h := ns.nextHandle
	ns.nextHandle++
	for int64(len(n.chunks())) <= i {
		n.setChunks(appendRef(n.chunks()))
	}
	n.chunks()[i] = chunkRef{handle: h, version: 1}
	ns.ref(h, n)
	return Chunk{Index: i, Handle: h, Version: 1}
}

// exactRefs is the longest chunk list that grows one ref at a time.
const exactRefs = 16

// appendRef appends an empty ref to a file's chunk list, into a new
// array of listCap of its length when the list is full: a list of up to
// exactRefs grows by one, into an array of its length (each such size is
// one of the allocator's classes, so none is spare: append's doubling
// left 4 slots for 3 chunks, 8 for 5).
func appendRef(refs []chunkRef) []chunkRef {
	if len(refs) < cap(refs) {
		return append(refs, chunkRef{})
	}
	out := make([]chunkRef, len(refs)+1, listCap(len(refs)+1))
	copy(out, refs)
	return out
}

func (ns *Namespace) bumpVersion(c *Command) Result {
	v, ok := ns.ChunkVersion(c.Handle)
	if !ok {
		return fail("bump version", "", chunkfs.KindNotExist, "no such chunk")
	}
	return ns.putVersion(c.Handle, v+1)
}

// putVersion sets chunk h's version to v in every inode that holds it.
func (ns *Namespace) putVersion(h chunkfs.Handle, v chunkfs.Version) Result {
	ns.heldMoved(h, v)
	var out Chunk
	ns.holders(h, func(n *inode) {
		ns.touch(n)
		for i := range n.chunks() {
			if r := &n.chunks()[i]; r.handle == h {
				r.version = v
				out = Chunk{Index: int64(i), Handle: h, Version: v}
			}
		}
	})
	return Result{Chunk: out}
}

// setVersion raises a chunk's version to c.Version. The master logs it after
// it has told the replicas (and when a replica reports a version above the
// logged one: the master had told them and failed before logging). A lower
// or equal version changes nothing.
func (ns *Namespace) setVersion(c *Command) Result {
	v, ok := ns.ChunkVersion(c.Handle)
	if !ok {
		return fail("set version", "", chunkfs.KindNotExist, "no such chunk")
	}
	return ns.putVersion(c.Handle, max(v, c.Version))
}
