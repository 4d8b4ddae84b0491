package main

import (
	"context"
	"fmt"
)

// external wraps a subcommand whose run function lives in a file owned by
// another part of chunkfs and parses its own flags: runX(ctx, args).
func external(name, args, summary, example string, fn func(context.Context, []string) error) *command {
	c := &command{name: name, args: args, summary: summary, example: example}
	c.run = func(ctx context.Context, e *env, argv []string) error {
		for _, a := range argv {
			if a == "-h" || a == "-help" || a == "--help" {
				printCommandHelp(e.stdout, c, nil)
				fmt.Fprintln(e.stdout)
				fn(ctx, []string{"--help"}) // prints its flags, if it can; the error is only "help requested"
				return nil
			}
		}
		return fn(ctx, argv)
	}
	return c
}

// serverCommands returns the subcommands whose run functions live in their
// own files: the servers (master.go, chunkserver.go), the FUSE mount
// (mount.go) and the benchmarks (bench.go).
func serverCommands() []*command {
	return []*command{
		external("master", "--dir DIR [--listen HOST:PORT] [flags]", "run a master server",
			"  chunkfs master --dir /var/lib/chunkfs/master --listen 10.0.0.1:7070", runMaster),
		external("chunkserver", "--dir DIR --master HOST:PORT [--listen HOST:PORT] [--rack R] [flags]", "run a chunkserver",
			"  chunkfs chunkserver --dir /data/chunkfs --master 10.0.0.1:7070 --listen 10.0.0.2:7071 --rack r1", runChunkserver),
		external("bench", "gfs [--quick] [--scale F] [--clients 1,2,4,8,16] [--out DIR]",
			"reproduce the GFS paper's measurements on a shaped testbed (needs root)", "  sudo chunkfs bench gfs --quick", runBench),
		external("bench-worker", "[flags]", "one client of a benchmark run (started by chunkfs bench)", "  (started by chunkfs bench, not by hand)", runBenchWorker),
		external("mount", "[--master ADDR] [cache flags] DIR", "mount the cluster on DIR with FUSE (until umount or Ctrl-C)",
			"  chunkfs mount /mnt/chunkfs &\n  ls /mnt/chunkfs", runMount),
		external("umount", "DIR", "unmount a chunkfs FUSE mount", "  chunkfs umount /mnt/chunkfs", runUmount),
	}
}
