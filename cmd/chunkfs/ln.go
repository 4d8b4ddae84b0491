package main

import "context"

var lnCommand = &command{
	name:    "ln",
	args:    "OLD NEW",
	summary: "give a file another name (a hard link; into NEW when it is a directory)",
	example: "  chunkfs ln /data/current /data/2026-12-04",
	run:     runLn,
}

func runLn(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	paths, c, err := start(ctx, e, fs, cf, args, operands{min: 2, max: 2, usage: "need OLD and NEW"})
	if err != nil {
		return err
	}
	defer c.Close()
	old, name, err := targetOf(ctx, c, paths[0], paths[1], false)
	if err != nil {
		return err
	}
	return c.Link(ctx, old, name)
}
