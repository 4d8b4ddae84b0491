// Command chunkfs is the one binary of chunkfs: every server role and every
// client tool is a subcommand. Run `chunkfs help` for the list.
//
// This package is the only place that reads flags, the environment and
// signals, or exits; each subcommand lives in its own file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// env is what a subcommand may touch of the process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	stdoutTTY      bool     // stdout is a terminal (progress bars)
	cmd            *command // the subcommand running
	master         string   // --master given before the subcommand
}

// command is one subcommand.
type command struct {
	name    string
	args    string // synopsis of the arguments
	summary string
	example string
	run     func(ctx context.Context, e *env, args []string) error
}

// commands is the dispatch table, filled in by commandTable.
func commandTable() map[string]*command {
	list := []*command{
		lsCommand, mkdirCommand, putCommand, getCommand, catCommand, tailCommand,
		rmCommand, mvCommand, lnCommand, snapshotCommand, cpCommand, statCommand, duCommand, chmodCommand,
		chownCommand, appendCommand, recordsCommand, chunksCommand, adminCommand, certCommand,
		devCommand, trashCommand, undeleteCommand,
	}
	list = append(list, serverCommands()...)
	m := make(map[string]*command, len(list))
	for _, c := range list {
		m[c.name] = c
	}
	return m
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills the process at once
	}()
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, stdoutTTY: isTerminal(os.Stdout)}
	code := run(ctx, e, os.Args[1:])
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the operation failed
	exitUsage = 2 // bad command line
)

// usageError marks an error in the command line.
type usageError struct{ msg string }

func (u *usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// run runs the subcommand args names and returns the exit status.
func run(ctx context.Context, e *env, args []string) int {
	cmds := commandTable()
	args, err := globalFlags(e, args)
	if err != nil {
		fmt.Fprintf(e.stderr, "chunkfs: %v\n", err)
		return exitUsage
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			if c, ok := cmds[args[1]]; ok {
				printCommandHelp(e.stdout, c, nil)
				return exitOK
			}
		}
		printHelp(e.stdout, cmds)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "chunkfs: unknown command %q (run 'chunkfs help')\n", args[0])
		return exitUsage
	}
	e.cmd = c
	err = c.run(ctx, e, args[1:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case isUsage(err):
		fmt.Fprintf(e.stderr, "chunkfs %s: %v (run 'chunkfs %s --help')\n", c.name, err, c.name)
		return exitUsage
	}
	fmt.Fprintf(e.stderr, "chunkfs %s: %s\n", c.name, oneLine(err))
	return exitError
}

// globalFlags takes --master ADDR (or --master=ADDR) given before the
// subcommand, as in `chunkfs --master h:7070 ls /`.
func globalFlags(e *env, args []string) ([]string, error) {
	for len(args) > 0 {
		a := args[0]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "master" {
			return args, nil
		}
		if !hasValue {
			if len(args) < 2 {
				return nil, usagef("--master needs an address")
			}
			value, args = args[1], args[1:]
		}
		e.master, args = value, args[1:]
	}
	return args, nil
}

func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u)
}

// oneLine keeps an error message on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func printHelp(w io.Writer, cmds map[string]*command) {
	fmt.Fprintln(w, "chunkfs: a distributed file system after the Google File System.")
	fmt.Fprintln(w, "\nUsage: chunkfs COMMAND [flags] [args]\n\nCommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nThe master's address comes from --master or $CHUNKFS_MASTER (default "+defaultMaster+").")
	fmt.Fprintln(w, "Run 'chunkfs COMMAND --help' for a command's flags and an example.")
}

func printCommandHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: chunkfs %s %s\n\n%s\n", c.name, c.args, c.summary)
	if fs != nil {
		var flags strings.Builder
		fs.SetOutput(&flags)
		fs.PrintDefaults()
		if flags.Len() > 0 {
			fmt.Fprintf(w, "\nFlags:\n%s", flags.String())
		}
	}
	if c.example != "" {
		fmt.Fprintf(w, "\nExample:\n%s\n", c.example)
	}
}

// flagSet returns a flag set for the running command.
func flagSet(e *env) *flag.FlagSet {
	fs := flag.NewFlagSet(e.cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args into fs, allowing flags after operands (as `ls /a -l`)
// and handling --help. It returns the operands.
func parse(e *env, fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case len(a) > 2 && a[0] == '-' && a[1] != '-' && fs.Lookup(a[1:]) == nil && allBool(fs, a[1:]):
			for _, r := range a[1:] { // bundled short flags: -lR
				flags = append(flags, "-"+string(r))
			}
		case len(a) > 1 && a[0] == '-':
			flags = append(flags, a)
			if takesValue(fs, a) && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		default:
			operands = append(operands, a)
		}
	}
	if err := fs.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandHelp(e.stdout, e.cmd, fs)
			return nil, err
		}
		return nil, &usageError{err.Error()}
	}
	return operands, nil
}

// takesValue reports whether flag argument a needs the next argument as its
// value (a non-boolean flag written without =).
func takesValue(fs *flag.FlagSet, a string) bool {
	name := strings.TrimLeft(a, "-")
	if strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return false
	}
	return true
}

// allBool reports whether every letter of s is a boolean flag of fs.
func allBool(fs *flag.FlagSet, s string) bool {
	for _, r := range s {
		f := fs.Lookup(string(r))
		if f == nil {
			return false
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			return false
		}
	}
	return true
}
