package main

import (
	"context"
	"fmt"
)

// external wraps a subcommand whose run function lives in a file owned by
// another part of chunkfs and parses its own flags: runX(ctx, args).
func external(name, args, summary, example string, fn func(context.Context, []string) error) *command {
	return externalHelp(name, args, summary, example, fn, false)
}

// externalOwnHelp is external for a command whose --help already prints its
// synopsis and an example.
func externalOwnHelp(name, args, summary string, fn func(context.Context, []string) error) *command {
	return externalHelp(name, args, summary, "", fn, true)
}

func externalHelp(name, args, summary, example string, fn func(context.Context, []string) error, ownHelp bool) *command {
	c := &command{name: name, args: args, summary: summary, example: example}
	c.run = func(ctx context.Context, e *env, argv []string) error {
		for _, a := range argv {
			if ownHelp && (a == "-h" || a == "-help" || a == "--help") {
				fn(ctx, []string{"--help"})
				return nil
			}
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
		externalOwnHelp("master", "--dir DIR [--listen HOST:PORT] [flags]", "run a master server", runMaster),
		externalOwnHelp("chunkserver", "--dir DIR --master HOST:PORT [--listen HOST:PORT] [--rack R] [flags]", "run a chunkserver", runChunkserver),
		external("bench", "gfs [--quick] [--scale F] [--clients 1,2,4,8,16] [--tls] [--out DIR]",
			"reproduce the GFS paper's measurements on a shaped testbed (needs root)", "  sudo chunkfs bench gfs --quick", runBench),
		external("bench-worker", "[flags]", "one client of a benchmark run (started by chunkfs bench)", "  (started by chunkfs bench, not by hand)", runBenchWorker),
		external("mount", "[--master ADDR] [cache flags] DIR", "mount the cluster on DIR with FUSE (until umount or Ctrl-C)",
			"  chunkfs mount /mnt/chunkfs &\n  ls /mnt/chunkfs", runMount),
		external("umount", "DIR", "unmount a chunkfs FUSE mount", "  chunkfs umount /mnt/chunkfs", runUmount),
	}
}
