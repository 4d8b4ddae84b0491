package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"golang.org/x/term"
)

// defaultMaster is the master address when neither --master nor
// $CHUNKFS_MASTER gives one; `chunkfs dev` listens there by default.
const defaultMaster = "127.0.0.1:7070"

// clientFlags are the flags every client command has.
type clientFlags struct {
	master string
}

func addClientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{}
	fs.StringVar(&cf.master, "master", "", "master address host:port (default $CHUNKFS_MASTER or "+defaultMaster+")")
	return cf
}

// connect dials the master named by --master, $CHUNKFS_MASTER or the default.
func (cf *clientFlags) connect(ctx context.Context, e *env) (*client.Client, error) {
	addr := cf.master
	if addr == "" {
		addr = e.master
	}
	if addr == "" {
		addr = e.getenv("CHUNKFS_MASTER")
	}
	if addr == "" {
		addr = defaultMaster
	}
	cfg := client.DefaultConfig()
	cfg.Master = addr
	c, err := client.New(ctx, cfg)
	if chunkfs.KindOf(err) == chunkfs.KindUnavailable {
		return nil, fmt.Errorf("cannot reach the master at %s (start one with 'chunkfs dev', or give --master or $CHUNKFS_MASTER): %w", addr, err)
	}
	return c, err
}

// remotePath checks a chunkfs path argument: it must be absolute.
func remotePath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", usagef("%q: chunkfs paths are absolute (start with /)", p)
	}
	return path.Clean(p), nil
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	return term.IsTerminal(int(f.Fd()))
}
