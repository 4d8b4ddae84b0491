package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/chunkfs/chunkfs/client"
)

// runBalance runs `chunkfs admin balance [status | start [--threshold P] |
// stop]`: it prints the rebalancer's state after the action.
func runBalance(ctx context.Context, e *env, cf *clientFlags, asJSON bool, threshold float64, thresholdSet bool, ops []string) error {
	action := "status"
	if len(ops) > 0 {
		action = ops[0]
	}
	switch {
	case len(ops) > 1:
		return usagef("admin balance takes one action: status, start or stop")
	case action != "status" && action != "start" && action != "stop":
		return usagef("unknown balance action %q; known: status, start, stop", action)
	case thresholdSet && action != "start":
		return usagef("--threshold goes with admin balance start")
	case thresholdSet && !(threshold > 0 && threshold < 100):
		return usagef("--threshold %v: want percentage points in (0, 100)", threshold)
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.Balance(ctx, action, threshold)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.stdout, st)
	}
	printBalance(e.stdout, st)
	return nil
}

// printBalance prints the rebalancer's state.
func printBalance(w io.Writer, b *client.BalanceStatus) {
	state := "stopped"
	if b.Running {
		state = "running"
	}
	fmt.Fprintf(w, "Balancer:          %s, threshold %g points around the mean utilisation\n", state, b.Threshold)
	fmt.Fprintf(w, "Spread:            %.1f points (highest minus lowest server utilisation)\n", b.Spread)
	fmt.Fprintf(w, "Moves:             %d in flight, %d replicas moved (%s), %s/s over the last minute\n",
		b.MovesInFlight, b.Moved, humanSize(b.BytesMoved), humanSize(int64(b.Rate)))
}

// runDecommission runs `chunkfs admin decommission [SERVER]` and `chunkfs
// admin recommission SERVER`: it drains SERVER (or undoes that), then
// prints every server being decommissioned with its progress.
func runDecommission(ctx context.Context, e *env, cf *clientFlags, asJSON, recommission bool, ops []string) error {
	switch {
	case len(ops) > 1:
		return usagef("name one chunkserver (its ID or address)")
	case recommission && len(ops) == 0:
		return usagef("admin recommission needs a chunkserver (its ID or address)")
	}
	server := ""
	if len(ops) == 1 {
		server = ops[0]
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	states, err := c.Decommission(ctx, server, recommission)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.stdout, states)
	}
	if len(states) == 0 {
		fmt.Fprintln(e.stdout, "No chunkserver is being decommissioned.")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tSTATE\tCHUNKS\tREMAINING")
	for _, s := range states {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", s.ID, s.Addr, drainState(s.State), s.Chunks, s.Remaining)
	}
	return tw.Flush()
}

// drainState spells out a decommissioned server's state.
func drainState(s string) string {
	if s == "decommissioned" {
		return "decommissioned (safe to remove)"
	}
	return s
}
