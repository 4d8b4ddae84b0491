package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/chunkfs/chunkfs/client"
)

var trashCommand = &command{
	name: "trash",
	args: "ls [--json] | purge ID...",
	summary: "ls lists what was deleted and can still be undeleted (yours, or everything for the superuser): " +
		"original path, deletion time, size, who deleted it; purge frees entries now",
	example: "  chunkfs trash ls\n  chunkfs trash ls --json | jq '.[] | select(.bytes > 1e9)'\n  chunkfs trash purge 42",
	run:     runTrash,
}

var undeleteCommand = &command{
	name:    "undelete",
	args:    "[-p] [--to NEWPATH] [--id ID] PATH",
	summary: "bring back what was deleted from PATH (the newest, or entry ID), at PATH or NEWPATH, until the master's --trash-period passes",
	example: "  chunkfs undelete /data/report.csv\n  chunkfs undelete --to /data/report.old /data/report.csv\n  chunkfs undelete -p /gone/dir/file",
	run:     runUndelete,
}

// trashJSON is one entry of trash ls --json.
type trashJSON struct {
	ID          uint64    `json:"id"`
	Path        string    `json:"path"`
	Type        string    `json:"type"`
	Deleted     time.Time `json:"deleted"`
	Expires     time.Time `json:"expires"`
	DeletedBy   uint32    `json:"deleted_by"`
	Owner       uint32    `json:"owner"`
	Files       int64     `json:"files"`
	Directories int64     `json:"directories"`
	Chunks      int64     `json:"chunks"`
	Bytes       int64     `json:"bytes"`
}

func runTrash(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	asJSON := fs.Bool("json", false, "ls: print a JSON array of entries")
	ops, c, err := start(ctx, e, fs, cf, args, operands{min: 1, max: -1, usage: "need ls or purge ID..."})
	if err != nil {
		return err
	}
	defer c.Close()
	switch {
	case ops[0] == "ls" && len(ops) == 1:
		return trashList(ctx, e, c, *asJSON)
	case ops[0] == "purge" && len(ops) > 1:
		ids := make([]uint64, len(ops)-1)
		for i, s := range ops[1:] {
			if ids[i], err = strconv.ParseUint(s, 10, 63); err != nil || ids[i] == 0 {
				return usagef("trash purge %q: an entry ID is a positive number (see chunkfs trash ls)", s)
			}
		}
		for _, id := range ids {
			if err := c.PurgeTrash(ctx, id); err != nil {
				return err
			}
		}
		return nil
	}
	return usagef("unknown trash command %q; known: ls, purge ID...", fmt.Sprint(ops))
}

func trashList(ctx context.Context, e *env, c *client.Client, asJSON bool) error {
	es, period, err := c.Trash(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]trashJSON, len(es))
		for i, t := range es {
			out[i] = trashJSON{ID: t.ID, Path: t.Path, Type: fileType(t.Info.FileMode), Deleted: t.Deleted.UTC(), Expires: t.Expires.UTC(),
				DeletedBy: t.DeletedBy, Owner: t.Info.UID, Files: t.Files, Directories: t.Directories, Chunks: t.Chunks, Bytes: t.Bytes}
		}
		return writeJSON(e.stdout, out)
	}
	if period == 0 {
		fmt.Fprintln(e.stdout, "The master keeps no trash (--trash-period 0): deleting deletes at once.")
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDELETED\tBY\tSIZE\tFILES\tPURGED IN\tPATH")
	for _, t := range es {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%s\t%s\n", t.ID, t.Deleted.UTC().Format(time.DateTime), t.DeletedBy,
			humanSize(t.Bytes), t.Files, time.Until(t.Expires).Round(time.Minute), t.Path)
	}
	return tw.Flush()
}

func runUndelete(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	var o client.UndeleteOptions
	fs.BoolVar(&o.Parents, "p", false, "make the destination's missing parent directories")
	fs.StringVar(&o.To, "to", "", "bring it back at this path instead")
	fs.Uint64Var(&o.ID, "id", 0, "the trash entry (chunkfs trash ls); default: the newest deleted from PATH")
	ops, c, err := start(ctx, e, fs, cf, args, operands{min: 1, max: 1, usage: "need the PATH it was deleted from", remote: true})
	if err != nil {
		return err
	}
	defer c.Close()
	if o.To != "" {
		if o.To, err = remotePath(o.To); err != nil {
			return err
		}
	}
	_, err = c.Undelete(ctx, ops[0], o)
	return err
}
