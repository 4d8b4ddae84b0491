package client

import (
	"path"
	"strconv"
	"strings"

	"github.com/chunkfs/chunkfs"
)

// checkPath validates a path given to the client and returns it cleaned.
// Paths are absolute ("/a/b"), at most chunkfs.MaxPathLen bytes, with
// components of at most chunkfs.MaxNameLen bytes and no NUL byte. "." and
// ".." components and doubled slashes are cleaned away as path.Clean does.
func checkPath(op, p string) (string, error) {
	switch {
	case p == "":
		return "", chunkfs.E(op, p, chunkfs.KindInvalid, "empty path")
	case !strings.HasPrefix(p, "/"):
		return "", chunkfs.E(op, p, chunkfs.KindInvalid, "path must be absolute (start with /)")
	case len(p) > chunkfs.MaxPathLen:
		return "", chunkfs.E(op, p[:64]+"…", chunkfs.KindTooLarge, "path longer than "+strconv.Itoa(chunkfs.MaxPathLen)+" bytes")
	case strings.IndexByte(p, 0) >= 0:
		return "", chunkfs.E(op, p, chunkfs.KindInvalid, "path contains a NUL byte")
	}
	p = path.Clean(p)
	for rest := p[1:]; rest != ""; {
		name, tail, _ := strings.Cut(rest, "/")
		if len(name) > chunkfs.MaxNameLen {
			return "", chunkfs.E(op, p, chunkfs.KindTooLarge, "path component longer than 255 bytes")
		}
		rest = tail
	}
	return p, nil
}

// checkPaths validates two paths (for rename and the like).
func checkPaths(op, a, b string) (string, string, error) {
	a, err := checkPath(op, a)
	if err != nil {
		return "", "", err
	}
	b, err = checkPath(op, b)
	return a, b, err
}
