package main

import (
	"context"

	"github.com/chunkfs/chunkfs"
)

var cpCommand = &command{
	name:    "cp",
	args:    "SRC... DST",
	summary: "copy files within chunkfs (into DST when it is a directory); an existing DST is replaced only once the copy is whole",
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
		if err == nil && fi.IsDir() {
			err = chunkfs.E("cp", s, chunkfs.KindIsDir, "cp copies files")
		}
		if err != nil {
			in.Close()
			return err
		}
		err = writeRemote(ctx, c, d, progressReader(e, in, fi.Length, "cp "+s))
		in.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
