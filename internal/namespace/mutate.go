package namespace

import (
	"io/fs"

	"github.com/chunkfs/chunkfs"
)

func (ns *Namespace) rename(c *Command) Result {
	const op = "rename"
	src, dst := c.Path, c.Target
	if err := ValidatePath(op, dst); err != nil {
		return Result{Err: err}
	}
	sp, sn, err := ns.existing(op, &c.Caller, src)
	if err != nil {
		return Result{Err: err}
	}
	if sp == nil || dst == "/" {
		return fail(op, src, chunkfs.KindInvalid, "cannot rename the root")
	}
	if sn.isDir() && isUnder(dst, src) && dst != src {
		return fail(op, src, chunkfs.KindInvalid, "cannot move a directory into itself: "+printable(dst))
	}
	if c.Flags&FlagExchange != 0 {
		return ns.exchange(c, sp, sn)
	}
	dp, dn, err := ns.resolve(op, &c.Caller, dst)
	if err != nil {
		return Result{Err: err}
	}
	if dn == sn {
		// The same entry, or two hard links of one inode: as rename(2),
		// nothing is done and both names stay.
		return Result{Info: sn.info(base(src))}
	}
	if err := ns.checkRename(c, sp, sn, dp, dn); err != nil {
		return Result{Err: err}
	}
	var r Result
	name := base(dst)
	switch {
	case dn != nil && !dn.isDir() && ns.trash.period > 0:
		r.Trashed = ns.toTrash(c, dst, dp, name, dn) // as JuiceFS: a replaced file can be undeleted
	case dn != nil:
		r.Garbage = ns.removeTree(dp, name, dn, c.Time)
	}
	ns.detach(sp, base(src), sn, c.Time)
	sn.ctime = c.Time // touched by detach
	ns.attach(dp, name, sn, c.Time)
	r.Info = sn.info(name)
	return r
}

// exchange swaps sn (in sp) with the entry at c.Target: each takes the
// other's name and directory, atomically (RENAME_EXCHANGE).
func (ns *Namespace) exchange(c *Command, sp, sn *inode) Result {
	const op = "rename"
	src, dst := c.Path, c.Target
	dp, dn, err := ns.existing(op, &c.Caller, dst)
	if err != nil {
		return Result{Err: err}
	}
	if dn == sn {
		return Result{Info: sn.info(base(src))}
	}
	if dn.isDir() && isUnder(src, dst) {
		return fail(op, dst, chunkfs.KindInvalid, "cannot exchange a directory with an entry below it: "+printable(src))
	}
	if !mayMove(&c.Caller, sp, sn, dp) || !mayMove(&c.Caller, dp, dn, sp) {
		return fail(op, src, chunkfs.KindPermission, "")
	}
	sname, dname := base(src), base(dst)
	ns.detach(sp, sname, sn, c.Time)
	ns.detach(dp, dname, dn, c.Time)
	sn.ctime, dn.ctime = c.Time, c.Time
	ns.attach(dp, dname, sn, c.Time)
	ns.attach(sp, sname, dn, c.Time)
	return Result{Info: sn.info(dname)}
}

// mayMove reports whether c may move n out of directory from into
// directory to: the rights to remove it from from and to add to to, and
// write permission on a directory that changes parent (its "..").
func mayMove(c *chunkfs.Caller, from, n, to *inode) bool {
	if !mayRemove(c, from, n) || !may(c, to, accessWrite|accessExec) {
		return false
	}
	return !n.isDir() || from == to || may(c, n, accessWrite)
}

// checkRename decides whether c may move sn (in sp) to its destination in
// dp, replacing dn if not nil.
func (ns *Namespace) checkRename(c *Command, sp, sn, dp, dn *inode) error {
	const op = "rename"
	src, dst := c.Path, c.Target
	if !mayRemove(&c.Caller, sp, sn) || !may(&c.Caller, dp, accessWrite|accessExec) {
		return chunkfs.E(op, src, chunkfs.KindPermission, "")
	}
	if sn.isDir() && sp != dp && !may(&c.Caller, sn, accessWrite) {
		return permission(op, src, "moving a directory needs write permission on it")
	}
	if dn == nil {
		return nil
	}
	switch {
	case c.Flags&FlagNoReplace != 0:
		return chunkfs.E(op, dst, chunkfs.KindExist, "")
	case !mayRemove(&c.Caller, dp, dn):
		return chunkfs.E(op, dst, chunkfs.KindPermission, "")
	case sn.isDir() && !dn.isDir():
		return chunkfs.E(op, dst, chunkfs.KindNotDir, "")
	case !sn.isDir() && dn.isDir():
		return chunkfs.E(op, dst, chunkfs.KindIsDir, "")
	case dn.isDir() && dn.ext().kids.Len() > 0:
		return chunkfs.E(op, dst, chunkfs.KindNotEmpty, "")
	}
	return nil
}

func (ns *Namespace) delete(c *Command) Result {
	parent, n, err := ns.deletable("delete", c)
	if err != nil {
		return Result{Err: err}
	}
	return Result{Garbage: ns.removeTree(parent, base(c.Path), n, c.Time)}
}

// deletable resolves what a delete or trash command removes and checks
// that c may remove it.
func (ns *Namespace) deletable(op string, c *Command) (parent, n *inode, err error) {
	p := c.Path
	parent, n, err = ns.existing(op, &c.Caller, p)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case parent == nil:
		return nil, nil, chunkfs.E(op, p, chunkfs.KindInvalid, "cannot delete the root")
	case c.Flags&FlagDirOnly != 0 && !n.isDir():
		return nil, nil, chunkfs.E(op, p, chunkfs.KindNotDir, "")
	case c.Flags&FlagFileOnly != 0 && n.isDir():
		return nil, nil, chunkfs.E(op, p, chunkfs.KindIsDir, "")
	case !mayRemove(&c.Caller, parent, n):
		return nil, nil, chunkfs.E(op, p, chunkfs.KindPermission, "")
	case n.isDir() && n.ext().kids.Len() > 0 && c.Flags&FlagRecursive == 0:
		return nil, nil, chunkfs.E(op, p, chunkfs.KindNotEmpty, "")
	case n.isDir() && !mayEmpty(&c.Caller, n):
		return nil, nil, permission(op, p, "cannot remove everything below")
	}
	return parent, n, nil
}

// mayEmpty reports whether c may remove everything below directory d, as
// rm -r would: read, write and search permission on every non-empty
// directory, and the sticky rule on every entry.
func mayEmpty(c *chunkfs.Caller, d *inode) bool {
	if d.ext().kids.Len() == 0 || isRoot(c) {
		return true
	}
	if !may(c, d, accessRead) {
		return false
	}
	ok := true
	d.ext().kids.all(func(_ string, k *inode) bool {
		ok = mayRemove(c, d, k) && (!k.isDir() || mayEmpty(c, k))
		return ok
	})
	return ok
}

// removeTree removes the entry name, which names n, from dir. An inode
// left with no name is freed, with everything below it for a directory;
// one that keeps a name elsewhere (a hard link) has its status changed.
// It returns the chunk handles that became garbage, in tree order.
func (ns *Namespace) removeTree(dir *inode, name string, n *inode, now int64) []chunkfs.Handle {
	ns.detach(dir, name, n, now)
	return ns.unlinked(n, now, nil)
}

// unlinked frees n if it lost its last name, or records the change of
// its link count, and appends the garbage it leaves to garbage.
func (ns *Namespace) unlinked(n *inode, now int64, garbage []chunkfs.Handle) []chunkfs.Handle {
	ns.touch(n)
	if n.nlink > 0 {
		n.ctime = now
		return garbage
	}
	for _, r := range n.chunks() {
		if r.handle != 0 && ns.unref(r.handle, n) {
			garbage = append(garbage, r.handle)
		}
	}
	if !n.isDir() {
		ns.files--
		ns.bytes -= n.length
		return garbage
	}
	ns.dirs--
	n.ext().kids.all(func(_ string, k *inode) bool {
		ns.touch(k)
		k.nlink--
		if k.isDir() {
			k.ext().parent = nil
		}
		garbage = ns.unlinked(k, now, garbage)
		return true
	})
	return garbage
}

func (ns *Namespace) setAttr(c *Command) Result {
	const op = "setattr"
	_, n, err := ns.existing(op, &c.Caller, c.Path)
	if err != nil {
		return Result{Err: err}
	}
	if err := ns.checkSetAttr(c, n); err != nil {
		return Result{Err: err}
	}
	if cut, ok := ns.cutAt(n, c.Length); c.Set&SetLength != 0 && ok && ns.Refs(cut.Handle) > 1 {
		return fail(op, c.Path, chunkfs.KindUnavailable, "the chunk holding the new end is shared with a snapshot and must be copied first; retry")
	}
	var r Result
	ns.touch(n)
	if c.Set&SetLength != 0 {
		r.Garbage, r.Cut = ns.setLength(n, c.Length, c.Time)
	}
	if c.Set&SetMode != 0 {
		n.mode = n.mode&fs.ModeType | permBits(c.Mode)
	}
	if c.Set&SetUID != 0 {
		n.uid = c.UID
	}
	if c.Set&SetGID != 0 {
		n.gid = c.GID
	}
	n.mode &^= killedBits(&c.Caller, c.Set, n)
	atime, mtime := c.ATime, c.MTime
	if c.Flags&FlagTimesNow != 0 {
		atime, mtime = c.Time, c.Time
	}
	if c.Set&SetATime != 0 {
		n.atime = atime
	}
	if c.Set&SetMTime != 0 {
		n.mtime = mtime
	}
	if c.Set&SetReplication != 0 {
		n.setRepl(uint8(c.Replication))
	}
	n.ctime = c.Time
	r.Info = n.info(base(c.Path))
	return r
}

// checkSetAttr decides whether c may make the changes it asks for on n.
func (ns *Namespace) checkSetAttr(c *Command, n *inode) error {
	const op = "setattr"
	p, who := c.Path, &c.Caller
	deny := func(msg string) error { return permission(op, p, msg) }
	if c.Set&SetMode != 0 && !owns(who, n) {
		return deny("only the owner may change the mode")
	}
	// As chown(2): the owner may "change" the owner to itself, and the
	// group to one it belongs to or to the group the file has.
	if c.Set&SetUID != 0 && !isRoot(who) && (c.UID != n.uid || who.UID != n.uid) {
		return deny("only the superuser may change the owner")
	}
	if c.Set&SetGID != 0 && !isRoot(who) && (who.UID != n.uid || c.GID != n.gid && !inGroup(who, c.GID)) {
		return deny("only the owner, as a member of the new group, may change the group")
	}
	if err := checkTimes(c, n); err != nil {
		return err
	}
	if c.Set&(SetReplication|SetLength) == 0 {
		return nil
	}
	if err := fileOnly(op, p, n); err != nil {
		return err
	}
	if !may(who, n, accessWrite) {
		return deny("")
	}
	return ns.checkSizes(c)
}

// checkTimes decides whether c may set n's times, as utimensat(2): to
// now, the owner or a caller with write permission; to times of its
// choosing, only the owner.
func checkTimes(c *Command, n *inode) error {
	who := &c.Caller
	switch {
	case c.Set&(SetATime|SetMTime) == 0 || owns(who, n):
		return nil
	case c.Flags&FlagTimesNow != 0 && may(who, n, accessWrite):
		return nil
	case c.Flags&FlagTimesNow != 0:
		return chunkfs.E("setattr", c.Path, chunkfs.KindPermission, "")
	}
	return permission("setattr", c.Path, "only the owner may set times other than now")
}

// killedBits are the mode bits a setattr by c clears on n, as Linux does:
// a chmod by a caller outside the file's (new) group loses the setgid bit,
// and a chown or chgrp of a non-directory by anyone but the superuser
// loses setuid, and setgid when group execute is set.
func killedBits(c *chunkfs.Caller, set uint8, n *inode) fs.FileMode {
	if isRoot(c) {
		return 0
	}
	var kill fs.FileMode
	if set&SetMode != 0 && !inGroup(c, n.gid) {
		kill |= fs.ModeSetgid
	}
	if set&(SetUID|SetGID) != 0 && !n.isDir() {
		kill |= fs.ModeSetuid
		if n.mode&0o010 != 0 { // without group execute, setgid marks locking, not privilege
			kill |= fs.ModeSetgid
		}
	}
	return kill
}

// checkSizes validates the replication and length a setattr asks for.
func (ns *Namespace) checkSizes(c *Command) error {
	const op = "setattr"
	if c.Set&SetReplication != 0 && (c.Replication < 1 || c.Replication > chunkfs.MaxReplication) {
		return chunkfs.E(op, c.Path, chunkfs.KindInvalid, "replication out of range")
	}
	if c.Set&SetLength == 0 {
		return nil
	}
	switch {
	case !ns.Initialized():
		return chunkfs.E(op, c.Path, chunkfs.KindUnavailable, "namespace not initialised")
	case c.Length < 0:
		return chunkfs.E(op, c.Path, chunkfs.KindInvalid, "negative length")
	case c.Length > ns.maxLength():
		return chunkfs.E(op, c.Path, chunkfs.KindTooLarge, "length above the maximum file size")
	}
	return nil
}

// setLength truncates or extends n. Shrinking drops whole chunks past the
// end and, when the new end falls inside a chunk that holds data past it,
// reports that chunk as cut, with the next version: the master has the
// replicas cut at that version and then logs it (OpSetVersion). Setting the
// length a file already has cuts again, so a truncation whose cut reached
// no replica can be retried.
func (ns *Namespace) setLength(n *inode, length, now int64) ([]chunkfs.Handle, *Cut) {
	ch, cut := ns.cutAt(n, length)
	garbage := ns.truncate(n, length, now)
	if !cut {
		return garbage, nil
	}
	ch.Version++
	return garbage, &Cut{Chunk: ch, Length: length % ns.chunkSize}
}

// cutAt returns the chunk of n that setting its length to length would
// cut in its middle, if any.
func (ns *Namespace) cutAt(n *inode, length int64) (Chunk, bool) {
	if ns.chunkSize <= 0 || length > n.length || length%ns.chunkSize == 0 {
		return Chunk{}, false
	}
	i := length / ns.chunkSize
	if i >= int64(len(n.chunks())) || n.chunks()[i].handle == 0 {
		return Chunk{}, false
	}
	r := n.chunks()[i]
	return Chunk{Index: i, Handle: r.handle, Version: r.version}, true
}
