package main

import (
	"context"
	"io"
	"os"
	"path"

	"github.com/chunkfs/chunkfs/client"
)

var putCommand = &command{
	name:    "put",
	args:    "LOCAL... REMOTE",
	summary: "copy local files (or - for stdin) into chunkfs; into REMOTE when it is a directory",
	example: "  chunkfs put access.log /logs/\n  tar c src | chunkfs put - /backup/src.tar",
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
		if err := putOne(ctx, e, c, l, dst); err != nil {
			return err
		}
	}
	return nil
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
