package main

import (
	"context"
	"fmt"
	"path"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

var lsCommand = &command{
	name:    "ls",
	args:    "[-l] [-R] [--json] [PATH...]",
	summary: "list directories (or describe files); PATH defaults to /. Names with control characters are printed in $'…' quoting",
	example: "  chunkfs ls -l /logs\n  chunkfs ls -R --json / | jq '.[].path'",
	run:     runLs,
}

func runLs(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	long := fs.Bool("l", false, "long listing: mode, replication factor (the target; chunks shows live replicas), owner, group, size, time, name")
	recursive := fs.Bool("R", false, "list subdirectories recursively")
	asJSON := fs.Bool("json", false, "print a JSON array of entries")
	paths, c, err := start(ctx, e, fs, cf, args, operands{max: -1, remote: true, def: []string{"/"}})
	if err != nil {
		return err
	}
	defer c.Close()
	l := &lister{c: c, e: e, long: *long, recursive: *recursive, json: *asJSON, headers: len(paths) > 1 || *recursive, entries: []fileJSON{}}
	for _, p := range paths {
		if err := l.list(ctx, p); err != nil {
			return err
		}
	}
	if l.json {
		return writeJSON(e.stdout, l.entries)
	}
	return nil
}

type lister struct {
	c                     *client.Client
	e                     *env
	long, recursive, json bool
	headers               bool
	entries               []fileJSON
	printed               int
}

func (l *lister) list(ctx context.Context, p string) error {
	fi, err := l.c.Stat(ctx, p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		l.emit(p, fi, p)
		return nil
	}
	infos, err := l.c.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	if l.headers && !l.json {
		if l.printed > 0 {
			fmt.Fprintln(l.e.stdout)
		}
		fmt.Fprintf(l.e.stdout, "%s:\n", quoteName(p))
	}
	l.printed++
	var dirs []string
	for _, d := range infos {
		info, _ := d.Info()
		child := path.Join(p, d.Name())
		l.emit(child, info.(*chunkfs.FileInfo), d.Name())
		if d.IsDir() {
			dirs = append(dirs, child)
		}
	}
	if l.recursive {
		for _, d := range dirs {
			if err := l.list(ctx, d); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *lister) emit(p string, fi *chunkfs.FileInfo, name string) {
	switch {
	case l.json:
		l.entries = append(l.entries, toJSON(p, fi))
	case l.long:
		fmt.Fprintln(l.e.stdout, longLine(fi, name))
	default:
		fmt.Fprintln(l.e.stdout, quoteName(name))
	}
}
