package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/chunkfs/chunkfs/client"
)

var putCommand = &command{
	name:    "put",
	args:    "LOCAL... REMOTE",
	summary: "copy local files or directories (or - for stdin) into chunkfs; into REMOTE when it is a directory",
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
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	locals, remote := ops[:len(ops)-1], ops[len(ops)-1]
	if remote, err = remotePath(remote); err != nil {
		return err
	}
	intoDir := len(locals) > 1
	if fi, err := c.Stat(ctx, remote); err == nil && fi.IsDir() {
		intoDir = true
	}
	for _, l := range locals {
		dst := remote
		if intoDir {
			if l == "-" {
				return usagef("- (stdin) needs a file name as REMOTE, not a directory")
			}
			dst = path.Join(remote, path.Base(l))
		}
		if st, err := os.Stat(l); err == nil && st.IsDir() {
			err = putTree(ctx, e, c, l, dst)
		} else {
			err = putOne(ctx, e, c, l, dst)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// putTree copies local directory dir to remote, making directories as needed.
func putTree(ctx context.Context, e *env, c *client.Client, dir, remote string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
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

func putOne(ctx context.Context, e *env, c *client.Client, local, remote string) error {
	var in io.Reader = e.stdin
	size := int64(-1)
	if local != "-" {
		f, err := os.Open(local)
		if err != nil {
			return err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		in = f
	}
	out, err := c.Create(ctx, remote)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, progressReader(e, in, size, "put "+path.Base(remote)))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
