package main

import (
	"context"
	"io"
	"time"
)

var recordsCommand = &command{
	name:    "records",
	args:    "[-f] [--json] REMOTE",
	summary: "print each record of a record-append file exactly once (skipping padding, fragments and duplicates)",
	example: "  chunkfs records /logs/events | wc -l",
	run:     runRecords,
}

// recordJSON is one record as --json prints it.
type recordJSON struct {
	Offset int64  `json:"offset"`
	ID     string `json:"id"`
	Data   string `json:"data"`
}

func runRecords(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print one JSON object per line: offset, id, data")
	follow := fs.Bool("f", false, "follow: print records as they are appended, until interrupted")
	interval := fs.Duration("interval", time.Second, "how often -f looks for new records")
	ops, c, err := start(ctx, e, fs, cf, args, operands{min: 1, max: 1, usage: "need exactly one REMOTE", remote: true})
	if err != nil {
		return err
	}
	remote := ops[0]
	defer c.Close()
	if *interval <= 0 {
		return usagef("--interval must be positive")
	}
	f, err := c.Open(ctx, remote)
	if err != nil {
		return err
	}
	defer f.Close()
	var in io.Reader = f
	if *follow {
		in = &follower{ctx: ctx, r: f, interval: *interval}
	}
	return printRecords(e.stdout, in, c.MaxRecord(), *asJSON, *follow)
}
