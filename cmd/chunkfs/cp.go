package main

import (
	"context"
	"io"
)

var cpCommand = &command{
	name:    "cp",
	args:    "SRC... DST",
	summary: "copy files within chunkfs (into DST when it is a directory)",
	example: "  chunkfs cp /logs/today /backup/today",
	run:     runCp,
}

func runCp(ctx context.Context, e *env, args []string) error {
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
		in, err := c.Open(ctx, s)
		if err != nil {
			return err
		}
		fi, err := in.Stat()
		if err != nil {
			in.Close()
			return err
		}
		out, err := c.Create(ctx, d)
		if err != nil {
			in.Close()
			return err
		}
		_, err = io.Copy(out, progressReader(e, in, fi.Length, "cp "+s))
		in.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
