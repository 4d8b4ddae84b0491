package main

import (
	"context"
	"io"
)

var catCommand = &command{
	name:    "cat",
	args:    "PATH...",
	summary: "print files to stdout",
	example: "  chunkfs cat /logs/today | grep ERROR",
	run:     runCat,
}

func runCat(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	paths, err := parse(e, fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usagef("missing PATH")
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, p := range paths {
		if p, err = remotePath(p); err != nil {
			return err
		}
		f, err := c.Open(ctx, p)
		if err != nil {
			return err
		}
		_, err = io.Copy(e.stdout, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
