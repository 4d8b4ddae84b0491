package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/certs"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"golang.org/x/term"
)

// defaultMaster is the master address when neither --master nor
// $CHUNKFS_MASTER gives one; `chunkfs dev` listens there by default.
const defaultMaster = "127.0.0.1:7070"

// clientFlags are the flags every client command has.
type clientFlags struct {
	master       string
	retryTimeout time.Duration
	leaderReads  bool
	tls          *tlsFlags
}

func addClientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{tls: addTLSFlags(fs)}
	fs.StringVar(&cf.master, "master", "", "master address host:port, or a group's masters comma-separated (default $CHUNKFS_MASTER or "+defaultMaster+")")
	fs.DurationVar(&cf.retryTimeout, "retry-timeout", client.DefaultConfig().RetryTimeout,
		"how long a read or write keeps retrying after failures (other replicas, a new primary) before it fails")
	fs.BoolVar(&cf.leaderReads, "leader-reads", false, "with a group of masters, read from the leader, not from observers")
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
	if cf.retryTimeout <= 0 {
		return nil, usagef("--retry-timeout must be positive")
	}
	sec, err := cf.tls.security(e.getenv)
	if err != nil {
		return nil, err
	}
	cfg := client.DefaultConfig()
	cfg.Security = sec
	cfg.Caller = certCaller(sec, cfg.Caller)
	cfg.Master = addr
	cfg.RetryTimeout, cfg.LeaderReads = cf.retryTimeout, cf.leaderReads
	c, err := client.New(ctx, cfg)
	if chunkfs.KindOf(err) == chunkfs.KindUnavailable {
		return nil, fmt.Errorf("cannot reach the master at %s (start one with 'chunkfs dev', or give --master or $CHUNKFS_MASTER): %w", addr, err)
	}
	return c, err
}

// certCaller is whom the CLI acts as: with a user's certificate, the user
// and groups it names (the master refuses any other claim); with a proxy
// mount's certificate or none, the process's user, def.
func certCaller(sec *rpc.Security, def chunkfs.Caller) chunkfs.Caller {
	id := sec.Identity()
	if id.Role != certs.RoleClient && (id.Role != certs.RoleMount || id.Proxy) {
		return def
	}
	return chunkfs.Caller{UID: id.UID, GIDs: slices.Clone(id.GIDs)}
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

// operands says what a client command takes after its flags.
type operands struct {
	min, max int      // bounds on their number; max < 0: no limit
	usage    string   // the usage error when the number is wrong
	remote   bool     // every operand is a chunkfs path: checked and cleaned
	def      []string // the operands when none are given
}

// start parses a client command's arguments, checks its operands as want
// says, and connects to the master. The caller closes the client.
func start(ctx context.Context, e *env, fs *flag.FlagSet, cf *clientFlags, args []string, want operands) ([]string, *client.Client, error) {
	ops, err := parse(e, fs, args)
	if err != nil {
		return nil, nil, err
	}
	if len(ops) == 0 && want.def != nil {
		ops = want.def
	}
	if len(ops) < want.min || (want.max >= 0 && len(ops) > want.max) {
		return nil, nil, usagef("%s", want.usage)
	}
	if want.remote {
		for i, p := range ops {
			if ops[i], err = remotePath(p); err != nil {
				return nil, nil, err
			}
		}
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	return ops, c, nil
}
