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
	ops, c, err := start(ctx, e, fs, cf, args, operands{min: 1, max: 1, usage: "need exactly one REMOTE", remote: true})
	if err != nil {
		return err
	}
	remote := ops[0]
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
