package namespace

import (
	"strconv"

	"github.com/chunkfs/chunkfs"
)

// link gives the inode at c.Path the further name c.Target, as link(2):
// the inode (a file, symbolic link, fifo, socket or device node; never a
// directory) is shared, chunks and all, and lives until its last name is
// removed. The checks come in link(2)'s order on Linux: the source must
// exist; the target's directory must exist and be searchable, the target
// must not exist, and the caller needs write and search permission on its
// directory; the source must not be a directory, nor have MaxLinks names.
func (ns *Namespace) link(c *Command) Result {
	const op = "link"
	src, dst := c.Path, c.Target
	sn, err := ns.source(op, c)
	if err != nil {
		return Result{Err: err}
	}
	dp, err := ns.newName(op, &c.Caller, dst)
	switch {
	case err != nil:
		return Result{Err: err}
	case sn.isDir():
		return Result{Err: permission(op, src, "a directory cannot have another name")}
	case sn.nlink >= MaxLinks:
		return fail(op, src, chunkfs.KindTooLarge, "too many links (the most is "+strconv.Itoa(MaxLinks)+")")
	}
	name := base(dst)
	ns.attach(dp, name, sn, c.Time)
	ns.touch(sn)
	sn.ctime = c.Time
	return Result{Info: sn.info(name)}
}
