package main

import (
	"context"
	"os/user"
	"strconv"
	"strings"
)

var chownCommand = &command{
	name:    "chown",
	args:    "OWNER[:GROUP] PATH...",
	summary: "set owner and group (names or numeric IDs; ':GROUP' alone sets the group)",
	example: "  chunkfs chown alice:staff /home/alice\n  chunkfs chown 1000:1000 /data",
	run:     runChown,
}

func runChown(ctx context.Context, e *env, args []string) error {
	flags := flagSet(e)
	cf := addClientFlags(flags)
	ops, err := parse(e, flags, args)
	if err != nil {
		return err
	}
	if len(ops) < 2 {
		return usagef("need OWNER[:GROUP] and PATH")
	}
	uid, gid, err := parseOwner(ops[0])
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
		if err := c.Chown(ctx, p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// parseOwner parses OWNER[:GROUP]; -1 means unchanged.
func parseOwner(s string) (uid, gid int, err error) {
	owner, group, _ := strings.Cut(s, ":")
	uid, gid = -1, -1
	if owner != "" {
		if uid, err = lookupID(owner, func(n string) (string, error) {
			u, err := user.Lookup(n)
			if err != nil {
				return "", err
			}
			return u.Uid, nil
		}); err != nil {
			return 0, 0, usagef("unknown user %q", owner)
		}
	}
	if group != "" {
		if gid, err = lookupID(group, func(n string) (string, error) {
			g, err := user.LookupGroup(n)
			if err != nil {
				return "", err
			}
			return g.Gid, nil
		}); err != nil {
			return 0, 0, usagef("unknown group %q", group)
		}
	}
	if uid < 0 && gid < 0 {
		return 0, 0, usagef("empty OWNER[:GROUP]")
	}
	return uid, gid, nil
}

// lookupID parses a numeric ID or looks a name up.
func lookupID(s string, lookup func(string) (string, error)) (int, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return int(n), nil
	}
	id, err := lookup(s)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(id, 10, 32)
	return int(n), err
}
