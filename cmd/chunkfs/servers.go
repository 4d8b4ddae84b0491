package main

import (
	"context"
	"fmt"
	"slices"
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
	return externalCommand(name, args, summary, example, fn, ownHelp, nil)
}

// externalWithSubcommands is external for a command whose first operand
// names a subcommand (bench gfs, bench recovery, …): its --help shows the
// flags of the subcommand named, or of subs[0] when none is.
func externalWithSubcommands(name, args, summary, example string, fn func(context.Context, []string) error, subs []string) *command {
	return externalCommand(name, args, summary, example, fn, false, subs)
}

func externalCommand(name, args, summary, example string, fn func(context.Context, []string) error, ownHelp bool, subs []string) *command {
	c := &command{name: name, args: args, summary: summary, example: example}
	c.run = func(ctx context.Context, e *env, argv []string) error {
		help := []string{"--help"}
		if len(subs) > 0 {
			sub := subs[0]
			if len(argv) > 0 && slices.Contains(subs, argv[0]) {
				sub = argv[0]
			}
			help = []string{sub, "--help"}
		}
		for _, a := range argv {
			if ownHelp && (a == "-h" || a == "-help" || a == "--help") {
				fn(ctx, help)
				return nil
			}
			if a == "-h" || a == "-help" || a == "--help" {
				printCommandHelp(e.stdout, c, nil)
				fmt.Fprintln(e.stdout)
				fn(ctx, help) // prints its flags, if it can; the error is only "help requested"
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
		externalWithSubcommands("bench", "gfs|recovery|observers|metadata|smallfile [flags]",
			"reproduce the papers' measurements: gfs, recovery and observers on a shaped testbed (need root), metadata with simulated chunkservers, smallfile through a mount",
			"  sudo chunkfs bench gfs --quick\n  chunkfs bench recovery --help", runBench, benchSubcommands),
		external("bench-worker", "[flags]", "one client of a benchmark run (started by chunkfs bench)", "  (started by chunkfs bench, not by hand)", runBenchWorker),
		external("mount", "[--master ADDR] [cache flags] DIR", "mount the cluster on DIR with FUSE (until umount or Ctrl-C)",
			"  chunkfs mount /mnt/chunkfs &\n  ls /mnt/chunkfs", runMount),
		external("umount", "DIR", "unmount a chunkfs FUSE mount", "  chunkfs umount /mnt/chunkfs", runUmount),
	}
}
