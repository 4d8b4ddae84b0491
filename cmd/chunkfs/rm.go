package main

import (
	"context"
	"errors"
	"io/fs"
)

var rmCommand = &command{
	name:    "rm",
	args:    "[-r] [-f] [--skip-trash] PATH...",
	summary: "remove files, or directories with -r: into the trash, from which chunkfs undelete brings them back until the master's --trash-period passes",
	example: "  chunkfs rm -r /tmp/old\n  chunkfs rm --skip-trash /tmp/huge",
	run:     runRm,
}

func runRm(ctx context.Context, e *env, args []string) error {
	flags := flagSet(e)
	cf := addClientFlags(flags)
	recursive := flags.Bool("r", false, "remove directories and their contents")
	force := flags.Bool("f", false, "ignore paths that do not exist")
	skip := flags.Bool("skip-trash", false, "delete at once, not into the trash (the space is reclaimed now; no undelete)")
	paths, c, err := start(ctx, e, flags, cf, args, operands{min: 1, max: -1, usage: "missing PATH", remote: true})
	if err != nil {
		return err
	}
	defer c.Close()
	for _, p := range paths {
		if *skip {
			err = c.RemoveNow(ctx, p, *recursive)
		} else if *recursive {
			if !*force {
				// RemoveAll ignores a missing path; rm -r without -f does not.
				if _, err := c.Stat(ctx, p); err != nil {
					return err
				}
			}
			err = c.RemoveAll(ctx, p)
		} else {
			err = c.Remove(ctx, p)
		}
		if err != nil && !(*force && errors.Is(err, fs.ErrNotExist)) {
			return err
		}
	}
	return nil
}
