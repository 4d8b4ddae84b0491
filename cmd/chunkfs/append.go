package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

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
	created := false
	if errors.Is(err, fs.ErrNotExist) {
		f, err = c.OpenFile(ctx, remote, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		created = err == nil
	}
	if err != nil {
		return err
	}
	n, err := appendRecords(e.stdin, f, *size, c.MaxRecord())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil && created && n == 0 {
		removeCreated(ctx, c, remote)
	}
	return err
}

// removeCreated removes the empty file a failed append created, so that
// an append that stored no record changes nothing; even after Ctrl-C.
func removeCreated(ctx context.Context, c *client.Client, remote string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if fi, err := c.Stat(rctx, remote); err == nil && fi.Length == 0 {
		c.Remove(rctx, remote)
	}
}

// appendRecords appends each line of r (without its newline), or each
// size-byte block when size > 0, as one record. It returns how many
// records were appended.
func appendRecords(r io.Reader, f *client.File, size, maxRecord int) (int, error) {
	if size > 0 {
		return appendBlocks(r, f, size)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxRecord+1)
	n := 0
	for sc.Scan() {
		if _, err := f.Append(sc.Bytes()); err != nil {
			return n, err
		}
		n++
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return n, fmt.Errorf("a line is longer than the largest record (%d bytes); use --record-size", maxRecord)
	}
	return n, sc.Err()
}

// appendBlocks appends each size-byte block of r (the last may be shorter)
// as one record.
func appendBlocks(r io.Reader, f *client.File, size int) (int, error) {
	buf := make([]byte, size)
	for n := 0; ; {
		m, err := io.ReadFull(r, buf)
		if m > 0 {
			if _, aerr := f.Append(buf[:m]); aerr != nil {
				return n, aerr
			}
			n++
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
