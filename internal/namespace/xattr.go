package namespace

import (
	"io/fs"
	"slices"
	"strings"

	"github.com/chunkfs/chunkfs"
)

// Extended attributes are name/value pairs on an inode, kept in the
// metadata log with the rest of it. Names are in one of Linux's
// namespaces, with its rules:
//
//   - user.: regular files and directories only; reading needs read
//     permission, setting and removing write permission; on a sticky
//     directory only its owner may set them.
//   - trusted.: the superuser only, also to see them listed.
//   - security.: anyone may read; the superuser sets them.
//
// system. (POSIX ACLs) and unknown namespaces are not supported. Sizes are
// bounded as Linux bounds them, and the whole set of one inode as one
// ext4 inode's extended block would not be, so that a hostile client
// cannot grow the master's memory without bound.
const (
	MaxXattrName  = 255      // bytes of a name, its namespace prefix included
	MaxXattrValue = 64 << 10 // bytes of one value (Linux's XATTR_SIZE_MAX)
	MaxXattrTotal = 64 << 10 // bytes of all names and values of one inode
)

// OpSetXattr flags, in Command.Set: setxattr(2)'s XATTR_CREATE (fail if the
// attribute exists) and XATTR_REPLACE (fail if it does not).
const (
	XattrCreate  uint8 = 1
	XattrReplace uint8 = 2
)

// xattr is one extended attribute.
type xattr struct {
	name  string
	value []byte
}

// xattrNamespace is the namespace prefix of name ("user." ...), or "".
func xattrNamespace(name string) string {
	for _, ns := range []string{"user.", "trusted.", "security."} {
		if strings.HasPrefix(name, ns) {
			return ns
		}
	}
	return ""
}

// checkXattrName validates an attribute's name.
func checkXattrName(op, p, name string) error {
	switch {
	case len(name) > MaxXattrName:
		return chunkfs.E(op, p, chunkfs.KindTooLarge, "attribute name longer than 255 bytes")
	case strings.IndexByte(name, 0) >= 0:
		return chunkfs.E(op, p, chunkfs.KindInvalid, "attribute name holds a NUL byte")
	case xattrNamespace(name) == "" || len(name) == len(xattrNamespace(name)):
		return chunkfs.E(op, p, chunkfs.KindNotSupported, "attribute namespace not supported (user., trusted., security.)")
	}
	return nil
}

// mayXattr decides whether c may read (write false) or change attribute
// name of n.
func mayXattr(op, p string, c *chunkfs.Caller, n *inode, name string, write bool) error {
	deny := chunkfs.E(op, p, chunkfs.KindPermission, "")
	switch xattrNamespace(name) {
	case "trusted.":
		if !isRoot(c) {
			return deny
		}
	case "security.":
		if write && !isRoot(c) {
			return deny
		}
	case "user.":
		if !n.isFile() && !n.isDir() {
			return chunkfs.E(op, p, chunkfs.KindPermission, "user attributes are for files and directories only")
		}
		if !write {
			if !may(c, n, accessRead) {
				return deny
			}
			return nil
		}
		if !may(c, n, accessWrite) {
			return deny
		}
		if n.isDir() && n.mode&fs.ModeSticky != 0 && !owns(c, n) {
			return deny
		}
	}
	return nil
}

// find returns the index of name in xs, or -1.
func findXattr(xs []xattr, name string) int {
	i, ok := slices.BinarySearchFunc(xs, name, func(x xattr, name string) int { return strings.Compare(x.name, name) })
	if !ok {
		return -1
	}
	return i
}

// xattrBytes is what xs holds, names and values.
func xattrBytes(xs []xattr) int {
	total := 0
	for _, x := range xs {
		total += len(x.name) + len(x.value)
	}
	return total
}

func (n *inode) xattrs() []xattr {
	if n.ext() == nil {
		return nil
	}
	return n.ext().xattrs
}

func (ns *Namespace) setXattr(c *Command) Result {
	const op = "setxattr"
	name, value := c.Target, c.Value
	if err := checkXattrName(op, c.Path, name); err != nil {
		return Result{Err: err}
	}
	if len(value) > MaxXattrValue {
		return fail(op, c.Path, chunkfs.KindTooLarge, "attribute value larger than 64 KiB")
	}
	if c.Set&^(XattrCreate|XattrReplace) != 0 || c.Set == XattrCreate|XattrReplace {
		return fail(op, c.Path, chunkfs.KindInvalid, "bad flags")
	}
	_, n, err := ns.existing(op, &c.Caller, c.Path)
	if err != nil {
		return Result{Err: err}
	}
	if err := mayXattr(op, c.Path, &c.Caller, n, name, true); err != nil {
		return Result{Err: err}
	}
	xs := n.xattrs()
	i := findXattr(xs, name)
	switch {
	case i >= 0 && c.Set&XattrCreate != 0:
		return fail(op, c.Path, chunkfs.KindExist, "attribute exists")
	case i < 0 && c.Set&XattrReplace != 0:
		return fail(op, c.Path, chunkfs.KindNoAttr, "")
	}
	grow := len(name) + len(value)
	if i >= 0 {
		grow = len(value) - len(xs[i].value)
	}
	if xattrBytes(xs)+grow > MaxXattrTotal {
		return fail(op, c.Path, chunkfs.KindNoSpace, "no room for more attributes on this file (64 KiB)")
	}
	ns.touch(n)
	v := slices.Clone(value)
	if v == nil {
		v = []byte{}
	}
	if i >= 0 {
		xs[i].value = v
	} else {
		if n.ext() == nil {
			n.setExt(&ext{})
		}
		at, _ := slices.BinarySearchFunc(xs, name, func(x xattr, name string) int { return strings.Compare(x.name, name) })
		n.ext().xattrs = slices.Insert(xs, at, xattr{name: name, value: v})
	}
	n.ctime = c.Time
	return Result{Info: n.info(base(c.Path))}
}

func (ns *Namespace) removeXattr(c *Command) Result {
	const op = "removexattr"
	if err := checkXattrName(op, c.Path, c.Target); err != nil {
		return Result{Err: err}
	}
	_, n, err := ns.existing(op, &c.Caller, c.Path)
	if err != nil {
		return Result{Err: err}
	}
	if err := mayXattr(op, c.Path, &c.Caller, n, c.Target, true); err != nil {
		return Result{Err: err}
	}
	i := findXattr(n.xattrs(), c.Target)
	if i < 0 {
		return fail(op, c.Path, chunkfs.KindNoAttr, "")
	}
	ns.touch(n)
	n.ext().xattrs = slices.Delete(n.ext().xattrs, i, i+1)
	if len(n.ext().xattrs) == 0 {
		n.ext().xattrs = nil
		if !n.isDir() && !n.isSymlink() && !n.isDevice() {
			n.setExt(nil) // files, fifos and sockets keep no ext without attributes
		}
	}
	n.ctime = c.Time
	return Result{Info: n.info(base(c.Path))}
}

// Xattr returns the value of attribute name of p.
func (ns *Namespace) Xattr(c chunkfs.Caller, p, name string) ([]byte, error) {
	const op = "getxattr"
	if err := checkXattrName(op, p, name); err != nil {
		return nil, err
	}
	_, n, err := ns.existing(op, &c, p)
	if err != nil {
		return nil, err
	}
	if err := mayXattr(op, p, &c, n, name, false); err != nil {
		return nil, err
	}
	xs := n.xattrs()
	i := findXattr(xs, name)
	if i < 0 {
		return nil, chunkfs.E(op, p, chunkfs.KindNoAttr, "")
	}
	return slices.Clone(xs[i].value), nil
}

// Xattrs lists the names of p's attributes that c may see, sorted: all
// but trusted.* ones unless c is the superuser.
func (ns *Namespace) Xattrs(c chunkfs.Caller, p string) ([]string, error) {
	_, n, err := ns.existing("listxattr", &c, p)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, x := range n.xattrs() {
		if xattrNamespace(x.name) == "trusted." && !isRoot(&c) {
			continue
		}
		names = append(names, x.name)
	}
	return names, nil
}
