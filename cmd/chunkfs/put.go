package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

var putCommand = &command{
	name:    "put",
	args:    "LOCAL... REMOTE",
	summary: "copy local files or directories (or - for stdin) into chunkfs; into REMOTE when it is a directory. An existing file is replaced only once the new copy is whole on the cluster",
	example: "  chunkfs put access.log /logs/\n  chunkfs put ./photos /backup/\n  tar c src | chunkfs put - /backup/src.tar",
	run:     runPut,
}

func runPut(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	ops, err := parse(e, fs, args)
	if err != nil {
		return err
	}
	if len(ops) < 2 {
		return usagef("need LOCAL and REMOTE")
	}
	locals, remote := ops[:len(ops)-1], ops[len(ops)-1]
	if remote, err = remotePath(remote); err != nil {
		return err
	}
	if err := checkLocals(locals); err != nil {
		return err
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	intoDir, err := isRemoteDir(ctx, c, remote, len(locals) > 1)
	if err != nil {
		return err
	}
	for _, l := range locals {
		if err := putPath(ctx, e, c, l, remote, intoDir); err != nil {
			return err
		}
	}
	return nil
}

// checkLocals makes sure every local source exists before anything is
// sent, and that stdin is named at most once.
func checkLocals(locals []string) error {
	stdin := 0
	for _, l := range locals {
		if l == "-" {
			stdin++
			continue
		}
		if _, err := os.Stat(l); err != nil {
			return err
		}
	}
	if stdin > 0 && len(locals) > 1 {
		return usagef("- (stdin) must be the only LOCAL")
	}
	return nil
}

// isRemoteDir reports whether the sources go into remote (an existing
// directory) rather than onto it; several sources need a directory.
func isRemoteDir(ctx context.Context, c *client.Client, remote string, many bool) (bool, error) {
	fi, err := c.Stat(ctx, remote)
	switch {
	case err == nil && fi.IsDir():
		return true, nil
	case err != nil && !errors.Is(err, iofs.ErrNotExist):
		return false, err
	case many:
		return false, chunkfs.E("put", remote, chunkfs.KindNotDir, "target of several sources must be an existing directory")
	}
	return false, nil
}

// putPath copies one local file or directory (or - for stdin) to remote,
// or into it when intoDir.
func putPath(ctx context.Context, e *env, c *client.Client, local, remote string, intoDir bool) error {
	dst := remote
	if intoDir {
		if local == "-" {
			return usagef("- (stdin) needs a file name as REMOTE, not a directory")
		}
		dst = path.Join(remote, filepath.Base(local))
	}
	if st, err := os.Stat(local); err == nil && st.IsDir() {
		return putTree(ctx, e, c, local, dst)
	}
	return putOne(ctx, e, c, local, dst)
}

// putTree copies local directory dir to remote, making directories as needed.
func putTree(ctx context.Context, e *env, c *client.Client, dir, remote string) error {
	return filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		dst := path.Join(remote, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			return c.MkdirAll(ctx, dst, 0o755)
		case d.Type().IsRegular():
			return putOne(ctx, e, c, p, dst)
		}
		fmt.Fprintf(e.stderr, "chunkfs put: skipping %s: not a regular file\n", p)
		return nil
	})
}

// putOne copies local file local (- for stdin) to remote file remote,
// replacing it only once the whole copy is on the cluster.
func putOne(ctx context.Context, e *env, c *client.Client, local, remote string) error {
	var in io.Reader = e.stdin
	size := int64(-1)
	if local != "-" {
		f, err := os.Open(local)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("put %s: not a regular file", local)
		}
		size, in = fi.Size(), f
	}
	return writeRemote(ctx, c, remote, progressReader(e, in, size, "put "+path.Base(remote)))
}
