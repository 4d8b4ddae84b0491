package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/chunkfs/chunkfs/client"
)

var appendCommand = &command{
	name:    "append",
	args:    "[--record-size N] REMOTE",
	summary: "record-append stdin to REMOTE (created if missing): each line, or each N-byte block, is one record",
	example: "  seq 1 1000 | chunkfs append /logs/events\n  chunkfs append --record-size 4096 /data/blocks < blocks.bin",
	run:     runAppend,
}

func runAppend(ctx context.Context, e *env, args []string) error {
	flags := flagSet(e)
	cf := addClientFlags(flags)
	size := flags.Int("record-size", 0, "records are blocks of this many bytes (the last may be shorter) instead of lines")
	ops, err := parse(e, flags, args)
	if err != nil {
		return err
	}
	if len(ops) != 1 {
		return usagef("need exactly one REMOTE")
	}
	if *size < 0 {
		return usagef("--record-size must be positive")
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
	if *size > c.MaxRecord() {
		return usagef("--record-size %d exceeds the largest record, %d bytes", *size, c.MaxRecord())
	}
	f, err := c.OpenFile(ctx, remote, os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = c.OpenFile(ctx, remote, os.O_WRONLY|os.O_CREATE, 0o644)
	}
	if err != nil {
		return err
	}
	err = appendRecords(e.stdin, f, *size, c.MaxRecord())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// appendRecords appends each line of r (without its newline), or each
// size-byte block when size > 0, as one record.
func appendRecords(r io.Reader, f *client.File, size, maxRecord int) error {
	if size > 0 {
		buf := make([]byte, size)
		for {
			n, err := io.ReadFull(r, buf)
			if n > 0 {
				if _, aerr := f.Append(buf[:n]); aerr != nil {
					return aerr
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxRecord+1)
	for line := 1; sc.Scan(); line++ {
		if _, err := f.Append(sc.Bytes()); err != nil {
			return err
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return fmt.Errorf("a line is longer than the largest record (%d bytes); use --record-size", maxRecord)
	}
	return sc.Err()
}
