package main

import (
	"context"
	"io"
	"time"

	"github.com/chunkfs/chunkfs/client"
)

var tailCommand = &command{
	name: "tail",
	args: "[-f] [-c BYTES] [--raw] PATH",
	summary: "print the end of a file; with -f keep printing what is appended. " +
		"A record-append file is printed as its records, one per line, as records does (--raw for its bytes)",
	example: "  chunkfs tail -f /logs/today\n  chunkfs tail -f /logs/events      # records appended by chunkfs append",
	run:     runTail,
}

func runTail(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	follow := fs.Bool("f", false, "follow: print data as the file grows, until interrupted")
	bytes := fs.Int64("c", 1024, "print the last BYTES bytes (of a record file: the records that start in them)")
	interval := fs.Duration("interval", time.Second, "how often -f looks for new data")
	raw := fs.Bool("raw", false, "print a record-append file's bytes, framing and padding included")
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
	t := &tailer{e: e, c: c, f: f, follow: *follow, interval: *interval}
	records, err := t.isRecords(ctx, *raw)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if _, err := f.Seek(max(0, fi.Length-*bytes), io.SeekStart); err != nil {
		return err
	}
	in := t.input(ctx)
	if records {
		return printRecords(e.stdout, in, c.MaxRecord(), false, *follow)
	}
	_, err = io.Copy(e.stdout, in)
	return err
}

// tailer is one run of tail.
type tailer struct {
	e        *env
	c        *client.Client
	f        *client.File
	follow   bool
	interval time.Duration
}

// isRecords decides whether to print records: the file starts with a
// record frame. Following an empty file, it waits for the first bytes (a
// record append makes a file's length cover whole records only).
func (t *tailer) isRecords(ctx context.Context, raw bool) (bool, error) {
	if raw {
		return false, nil
	}
	for {
		fi, err := t.f.Stat()
		if err != nil {
			return false, err
		}
		if fi.Length > 0 || !t.follow {
			return client.StartsWithRecord(t.f, t.c.MaxRecord())
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(t.interval):
		}
	}
}

// input is what is printed: the file from its position, and with -f what
// is appended after, until ctx is done.
func (t *tailer) input(ctx context.Context) io.Reader {
	if !t.follow {
		return t.f
	}
	return &follower{ctx: ctx, r: t.f, interval: t.interval}
}
