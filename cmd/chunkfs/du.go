package main

import (
	"context"
	"fmt"
	"path"

	"github.com/chunkfs/chunkfs/client"
)

var duCommand = &command{
	name:    "du",
	args:    "[-s] [-h] PATH...",
	summary: "show space used by files (bytes of data, before replication)",
	example: "  chunkfs du -s -h /logs",
	run:     runDu,
}

func runDu(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	summary := fs.Bool("s", false, "one total per PATH instead of one line per entry")
	human := fs.Bool("h", false, "sizes in K, M, G (powers of 1024)")
	paths, c, err := start(ctx, e, fs, cf, args, operands{max: -1, remote: true, def: []string{"/"}})
	if err != nil {
		return err
	}
	defer c.Close()
	size := func(n int64) string {
		if *human {
			return humanSize(n)
		}
		return fmt.Sprint(n)
	}
	for _, p := range paths {
		fi, err := c.Stat(ctx, p)
		if err != nil {
			return err
		}
		if *summary || !fi.IsDir() {
			total, err := treeSize(ctx, c, p)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s\t%s\n", size(total), quoteName(p))
			continue
		}
		ents, err := c.ReadDir(ctx, p)
		if err != nil {
			return err
		}
		for _, d := range ents {
			total, err := treeSize(ctx, c, path.Join(p, d.Name()))
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s\t%s\n", size(total), quoteName(path.Join(p, d.Name())))
		}
	}
	return nil
}

// treeSize sums the lengths of the files at and under p.
func treeSize(ctx context.Context, c *client.Client, p string) (int64, error) {
	fi, err := c.Stat(ctx, p)
	if err != nil || !fi.IsDir() {
		if err != nil {
			return 0, err
		}
		return fi.Length, nil
	}
	ents, err := c.ReadDir(ctx, p)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, d := range ents {
		if !d.IsDir() {
			info, _ := d.Info()
			total += info.Size()
			continue
		}
		n, err := treeSize(ctx, c, path.Join(p, d.Name()))
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
