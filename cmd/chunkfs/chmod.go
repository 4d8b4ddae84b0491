package main

import (
	"context"
	"io/fs"
	"strconv"
)

var chmodCommand = &command{
	name:    "chmod",
	args:    "MODE PATH...",
	summary: "set permission bits (octal MODE)",
	example: "  chunkfs chmod 640 /secret/report",
	run:     runChmod,
}

func runChmod(ctx context.Context, e *env, args []string) error {
	flags := flagSet(e)
	cf := addClientFlags(flags)
	ops, err := parse(e, flags, args)
	if err != nil {
		return err
	}
	if len(ops) < 2 {
		return usagef("need MODE and PATH")
	}
	mode, err := parseMode(ops[0])
	if err != nil {
		return err
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, p := range ops[1:] {
		if p, err = remotePath(p); err != nil {
			return err
		}
		if err := c.Chmod(ctx, p, mode); err != nil {
			return err
		}
	}
	return nil
}

// parseMode parses octal permission bits, with setuid (4000), setgid (2000)
// and sticky (1000).
func parseMode(s string) (fs.FileMode, error) {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, usagef("bad mode %q: want octal like 644 or 1777", s)
	}
	m := fs.FileMode(n & 0o777)
	if n&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if n&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if n&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, nil
}
