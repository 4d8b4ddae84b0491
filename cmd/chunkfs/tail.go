package main

import (
	"context"
	"errors"
	"io"
	"time"
)

var tailCommand = &command{
	name:    "tail",
	args:    "[-f] [-c BYTES] PATH",
	summary: "print the end of a file; with -f keep printing what is appended",
	example: "  chunkfs tail -f /logs/today",
	run:     runTail,
}

func runTail(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	follow := fs.Bool("f", false, "follow: print data as the file grows, until interrupted")
	bytes := fs.Int64("c", 1024, "print the last BYTES bytes")
	interval := fs.Duration("interval", time.Second, "how often -f looks for new data")
	paths, err := parse(e, fs, args)
	if err != nil {
		return err
	}
	if len(paths) != 1 {
		return usagef("need exactly one PATH")
	}
	if *bytes < 0 || *interval <= 0 {
		return usagef("-c and --interval must be positive")
	}
	p, err := remotePath(paths[0])
	if err != nil {
		return err
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	f, err := c.Open(ctx, p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if _, err := f.Seek(max(0, fi.Length-*bytes), io.SeekStart); err != nil {
		return err
	}
	for {
		if _, err := io.Copy(e.stdout, f); err != nil {
			if *follow && errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		if !*follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // interrupted: the normal end of tail -f
		case <-time.After(*interval):
		}
	}
}
