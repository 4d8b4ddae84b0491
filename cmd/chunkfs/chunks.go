package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/chunkfs/chunkfs/client"
)

var chunksCommand = &command{
	name:    "chunks",
	args:    "[--json] PATH",
	summary: "list a file's chunks: index, handle, version, primary and replicas",
	example: "  chunkfs chunks /logs/today",
	run:     runChunks,
}

func runChunks(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print a JSON array")
	ops, c, err := start(ctx, e, fs, cf, args, operands{min: 1, max: 1, usage: "need exactly one PATH", remote: true})
	if err != nil {
		return err
	}
	p := ops[0]
	defer c.Close()
	chunks, err := c.Chunks(ctx, p)
	if err != nil {
		return err
	}
	if *asJSON {
		if chunks == nil {
			chunks = []client.ChunkInfo{}
		}
		return writeJSON(e.stdout, chunks)
	}
	fmt.Fprintf(e.stdout, "%-6s %-18s %-8s %-21s %s\n", "INDEX", "HANDLE", "VERSION", "PRIMARY", "REPLICAS")
	for _, ch := range chunks {
		primary := ch.Primary
		if primary == "" {
			primary = "-"
		}
		fmt.Fprintf(e.stdout, "%-6d %#016x %-8d %-21s %s\n", ch.Index, ch.Handle, ch.Version, primary, strings.Join(ch.Replicas, ","))
	}
	return nil
}
