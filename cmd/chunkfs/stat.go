package main

import (
	"context"
	"fmt"
)

var statCommand = &command{
	name:    "stat",
	args:    "[--json] PATH...",
	summary: "show metadata of files and directories",
	example: "  chunkfs stat /logs/today\n  chunkfs stat --json /logs/today | jq .size",
	run:     runStat,
}

func runStat(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON (an object, or an array for several paths)")
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
	var out []fileJSON
	for _, p := range paths {
		if p, err = remotePath(p); err != nil {
			return err
		}
		fi, err := c.Stat(ctx, p)
		if err != nil {
			return err
		}
		out = append(out, toJSON(p, fi))
	}
	if *asJSON {
		if len(out) == 1 {
			return writeJSON(e.stdout, out[0])
		}
		return writeJSON(e.stdout, out)
	}
	for i, j := range out {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		printStat(e, j)
	}
	return nil
}

func printStat(e *env, j fileJSON) {
	line := func(label, format string, args ...any) {
		fmt.Fprintf(e.stdout, "%-12s %s\n", label+":", fmt.Sprintf(format, args...))
	}
	line("Path", "%s", quoteName(j.Path))
	line("Type", "%s", j.Type)
	line("Size", "%d", j.Size)
	line("Mode", "%s (%s)", j.Mode, j.Perm)
	line("Owner", "uid %d, gid %d", j.UID, j.GID)
	line("Inode", "%d", j.Inode)
	line("Links", "%d", j.Nlink)
	if j.Type == "file" {
		line("Replication", "%d", j.Replication)
		line("Chunks", "%d", j.Chunks)
	}
	if j.Target != "" {
		line("Target", "%s", quoteName(j.Target))
	}
	line("Modified", "%s", j.MTime.Format("2006-01-02 15:04:05.000000000 UTC"))
	line("Accessed", "%s", j.ATime.Format("2006-01-02 15:04:05.000000000 UTC"))
}
