package main

import "context"

var mkdirCommand = &command{
	name:    "mkdir",
	args:    "[-p] [-m MODE] PATH...",
	summary: "make directories",
	example: "  chunkfs mkdir -p /logs/2026/12",
	run:     runMkdir,
}

func runMkdir(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	parents := fs.Bool("p", false, "make missing parents; no error if the directory exists")
	mode := fs.String("m", "755", "permission bits, octal")
	paths, err := parse(e, fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usagef("missing PATH")
	}
	perm, err := parseMode(*mode)
	if err != nil {
		return err
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
		if *parents {
			err = c.MkdirAll(ctx, p, perm)
		} else {
			err = c.Mkdir(ctx, p, perm)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
