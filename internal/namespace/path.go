package namespace

import (
	"path"
	"strconv"
	"strings"

	"github.com/chunkfs/chunkfs"
)

// ValidatePath checks that p is a path the namespace accepts: absolute,
// clean (no empty, "." or ".." components, no trailing slash), without NUL,
// with components of at most chunkfs.MaxNameLen bytes and at most
// chunkfs.MaxPathLen bytes in all. The error is KindInvalid, names the path
// and says what is wrong.
func ValidatePath(op, p string) error {
	msg := pathProblem(p)
	if msg == "" {
		return nil
	}
	return chunkfs.E(op, printable(p), chunkfs.KindInvalid, msg)
}

func pathProblem(p string) string {
	switch {
	case p == "":
		return "empty path"
	case len(p) > chunkfs.MaxPathLen:
		return "path longer than " + strconv.Itoa(chunkfs.MaxPathLen) + " bytes"
	case p[0] != '/':
		return "path is not absolute"
	case strings.IndexByte(p, 0) >= 0:
		return "path contains a NUL byte"
	case path.Clean(p) != p:
		return "path is not clean (empty, \".\" or \"..\" component, or trailing slash)"
	}
	if longestName(p) > chunkfs.MaxNameLen {
		return "path component longer than " + strconv.Itoa(chunkfs.MaxNameLen) + " bytes"
	}
	return ""
}

// longestName returns the length of p's longest slash-separated component,
// without allocating.
func longestName(p string) int {
	longest := 0
	for p != "" {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			i = len(p)
		}
		longest = max(longest, i)
		p = p[min(i+1, len(p)):]
	}
	return longest
}

// printable returns p as is, or quoted when it holds bytes that would garble
// a one-line message, and shortened when very long.
func printable(p string) string {
	if len(p) > 512 {
		p = p[:512] + "..."
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			return strconv.Quote(p)
		}
	}
	return p
}

// split returns the parent directory and base name of a valid path; the
// root's parent is "".
func split(p string) (dir, name string) {
	if p == "/" {
		return "", ""
	}
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/", p[1:]
	}
	return p[:i], p[i+1:]
}

// base returns the name a valid path's last entry has: "/" for the root.
func base(p string) string {
	if p == "/" {
		return "/"
	}
	_, name := split(p)
	return name
}

// isUnder reports whether p is dir or inside it (both valid paths).
func isUnder(p, dir string) bool {
	if dir == "/" || p == dir {
		return true
	}
	return strings.HasPrefix(p, dir) && p[len(dir)] == '/'
}
