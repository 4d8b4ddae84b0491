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
	summary: "list a file's chunks: index, handle, version, live replicas of the file's replication factor, primary and replicas",
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
	fi, err := c.Stat(ctx, p)
	if err != nil {
		return err
	}
	chunks, err := c.Chunks(ctx, p)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]chunkJSON, len(chunks))
		for i, ch := range chunks {
			out[i] = chunkJSON{ChunkInfo: ch, Live: len(ch.Replicas), Replication: fi.Replication}
		}
		return writeJSON(e.stdout, out)
	}
	fmt.Fprintf(e.stdout, "%-6s %-18s %-8s %-5s %-21s %s\n", "INDEX", "HANDLE", "VERSION", "LIVE", "PRIMARY", "REPLICAS")
	for _, ch := range chunks {
		primary := ch.Primary
		if primary == "" {
			primary = "-"
		}
		live := fmt.Sprintf("%d/%d", len(ch.Replicas), fi.Replication)
		fmt.Fprintf(e.stdout, "%-6d %#016x %-8d %-5s %-21s %s\n", ch.Index, ch.Handle, ch.Version, live, primary, strings.Join(ch.Replicas, ","))
	}
	return nil
}

// chunkJSON is one chunk as --json prints it: where it lives, how many
// live replicas it has and how many its file asks for.
type chunkJSON struct {
	client.ChunkInfo
	Live        int `json:"live"`
	Replication int `json:"replication"`
}
