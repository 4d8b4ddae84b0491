package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"time"

	"github.com/chunkfs/chunkfs/client"
)

// follower reads a file and, at its end, waits for it to grow instead of
// returning io.EOF, looking again every interval; once ctx is done it
// returns io.EOF, the normal end of tail -f.
type follower struct {
	ctx      context.Context
	r        io.Reader
	interval time.Duration
}

func (f *follower) Read(p []byte) (int, error) {
	for {
		n, err := f.r.Read(p)
		if f.ctx.Err() != nil {
			return n, io.EOF
		}
		if n > 0 || (err != nil && err != io.EOF) {
			return n, err
		}
		select {
		case <-f.ctx.Done():
			return 0, io.EOF
		case <-time.After(f.interval):
		}
	}
}

// printRecords prints each record r holds once, one per line (or as JSON
// lines), flushing after each when follow is set so a tail -f shows every
// record as it lands.
func printRecords(w io.Writer, r io.Reader, maxRecord int, asJSON, follow bool) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	rr := client.NewRecordReader(r, maxRecord)
	for {
		rec, err := rr.Next()
		if errors.Is(err, io.EOF) {
			return bw.Flush()
		}
		if err != nil {
			bw.Flush()
			return err
		}
		if asJSON {
			err = writeJSONLine(bw, recordJSON{Offset: rec.Offset, ID: rec.ID.String(), Data: string(rec.Data)})
		} else {
			bw.Write(rec.Data)
			err = bw.WriteByte('\n')
		}
		if err == nil && follow {
			err = bw.Flush()
		}
		if err != nil {
			return err
		}
	}
}
