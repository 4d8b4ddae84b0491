package main

import (
	"context"
	"io"
)

var catCommand = &command{
	name:    "cat",
	args:    "PATH...",
	summary: "print files to stdout, byte for byte: a record-append file's framing and padding too (records and tail print its records)",
	example: "  chunkfs cat /logs/today | grep ERROR",
	run:     runCat,
}

func runCat(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	paths, c, err := start(ctx, e, fs, cf, args, operands{min: 1, max: -1, usage: "missing PATH", remote: true})
	if err != nil {
		return err
	}
	defer c.Close()
	for _, p := range paths {
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
