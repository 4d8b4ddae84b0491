package main

import (
	"bufio"
	"context"
	"io"

	"github.com/chunkfs/chunkfs/client"
)

var recordsCommand = &command{
	name:    "records",
	args:    "[--json] REMOTE",
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
	ops, err := parse(e, fs, args)
	if err != nil {
		return err
	}
	if len(ops) != 1 {
		return usagef("need exactly one REMOTE")
	}
	remote, err := remotePath(ops[0])
	if err != nil {
		return err
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	f, err := c.Open(ctx, remote)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(e.stdout, 64<<10)
	rr := client.NewRecordReader(f, c.MaxRecord())
	for {
		rec, err := rr.Next()
		if err == io.EOF {
			return w.Flush()
		}
		if err != nil {
			w.Flush()
			return err
		}
		if *asJSON {
			err = writeJSONLine(w, recordJSON{Offset: rec.Offset, ID: rec.ID.String(), Data: string(rec.Data)})
		} else {
			w.Write(rec.Data)
			err = w.WriteByte('\n')
		}
		if err != nil {
			return err
		}
	}
}
