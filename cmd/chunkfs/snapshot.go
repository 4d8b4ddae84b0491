package main

import "context"

var snapshotCommand = &command{
	name:    "snapshot",
	args:    "SRC DST",
	summary: "make DST a copy-on-write snapshot of a file or directory tree (no data copied until either side changes)",
	example: "  chunkfs snapshot /data/logs /snapshots/logs-2026-12-05",
	run:     runSnapshot,
}

func runSnapshot(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	paths, c, err := start(ctx, e, fs, cf, args, operands{min: 2, max: 2, usage: "need SRC and DST"})
	if err != nil {
		return err
	}
	defer c.Close()
	for i, p := range paths {
		if paths[i], err = remotePath(p); err != nil {
			return err
		}
	}
	return c.Snapshot(ctx, paths[0], paths[1])
}
