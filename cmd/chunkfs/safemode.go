package main

import (
	"context"
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
)

// safeModePoll is how often admin safemode wait asks the master.
const safeModePoll = time.Second

// runSafeMode runs `chunkfs admin safemode [get | enter | leave | wait
// [--timeout D]]`, as hdfs dfsadmin -safemode: it prints the master's safe
// mode after the action. Wait returns once the master is out of safe mode
// (exit status 1 if --timeout passes first), riding out a master that
// cannot be reached meanwhile (it may be restarting).
func runSafeMode(ctx context.Context, e *env, cf *clientFlags, asJSON bool, timeout time.Duration, timeoutSet bool, ops []string) error {
	action := "get"
	if len(ops) > 0 {
		action = ops[0]
	}
	switch {
	case len(ops) > 1:
		return usagef("admin safemode takes one action: get, enter, leave or wait")
	case action != "get" && action != "enter" && action != "leave" && action != "wait":
		return usagef("unknown safemode action %q; known: get, enter, leave, wait", action)
	case timeoutSet && action != "wait":
		return usagef("--timeout goes with admin safemode wait")
	case timeoutSet && timeout <= 0:
		return usagef("--timeout %v: want a positive duration", timeout)
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	var st *client.SafeModeStatus
	if action == "wait" {
		st, err = waitSafeModeOff(ctx, c, timeout)
	} else {
		st, err = c.SafeMode(ctx, action)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.stdout, st)
	}
	printSafeMode(e, st)
	return nil
}

// waitSafeModeOff asks the master every safeModePoll until it is out of
// safe mode, or timeout (0: none) passes.
func waitSafeModeOff(ctx context.Context, c *client.Client, timeout time.Duration) (*client.SafeModeStatus, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var last *client.SafeModeStatus
	for {
		st, err := c.SafeMode(ctx, "get")
		switch {
		case err == nil && !st.On:
			return st, nil
		case err == nil:
			last = st
		case ctx.Err() == nil && chunkfs.KindOf(err) != chunkfs.KindUnavailable:
			return nil, err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return nil, fmt.Errorf("safemode wait: still in safe mode (%s) after %v", last.Reason, timeout)
			}
			return nil, fmt.Errorf("safemode wait: %w", ctx.Err())
		case <-time.After(safeModePoll):
		}
	}
}

// printSafeMode prints the master's safe mode in one line.
func printSafeMode(e *env, st *client.SafeModeStatus) {
	if !st.On {
		fmt.Fprintln(e.stdout, "Safe mode is OFF")
		return
	}
	fmt.Fprintf(e.stdout, "Safe mode is ON (%s); no chunk is created and nothing re-replicated until it ends\n", st.Reason)
}
