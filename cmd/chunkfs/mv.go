package main

import (
	"context"
	"errors"
	"path"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

var mvCommand = &command{
	name:    "mv",
	args:    "SRC... DST",
	summary: "rename or move files and directories (into DST when it is a directory)",
	example: "  chunkfs mv /logs/today /archive/",
	run:     runMv,
}

func runMv(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	paths, c, err := start(ctx, e, fs, cf, args, operands{min: 2, max: -1, usage: "need SRC and DST"})
	if err != nil {
		return err
	}
	defer c.Close()
	srcs, dst := paths[:len(paths)-1], paths[len(paths)-1]
	for _, src := range srcs {
		s, d, err := targetOf(ctx, c, src, dst, len(srcs) > 1)
		if err != nil {
			return err
		}
		if err := c.Rename(ctx, s, d); err != nil {
			return err
		}
	}
	return nil
}

// targetOf resolves copying or moving src to dst: into dst when dst is an
// existing directory (or must be one, with several sources).
func targetOf(ctx context.Context, c *client.Client, src, dst string, many bool) (string, string, error) {
	s, err := remotePath(src)
	if err != nil {
		return "", "", err
	}
	d, err := remotePath(dst)
	if err != nil {
		return "", "", err
	}
	fi, err := c.Stat(ctx, d)
	switch {
	case err == nil && fi.IsDir():
		return s, path.Join(d, path.Base(s)), nil
	case many && err == nil:
		return "", "", chunkfs.E("mv", d, chunkfs.KindNotDir, "target of several sources must be a directory")
	case many:
		return "", "", err
	case err != nil && !errors.Is(err, chunkfs.ErrNotDir) && chunkfs.KindOf(err) != chunkfs.KindNotExist:
		return "", "", err
	}
	return s, d, nil
}
