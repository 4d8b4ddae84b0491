package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/chunkfs/chunkfs/client"
)

var adminCommand = &command{
	name: "admin",
	args: "report | fsck [PATH] | ha [add-voter ID ADDR | add-observer ID ADDR | remove ID | transfer-leader [ID]] | " +
		"balance [status | start [--threshold P] | stop] | decommission [SERVER] | recommission SERVER | " +
		"safemode [get | enter | leave | wait [--timeout D]] [--json]",
	summary: "cluster administration: report prints the cluster's figures, fsck the health of files' chunks, ha the masters of a group (and changes it), " +
		"balance the rebalancer, decommission drains a chunkserver (no argument: shows the drains), recommission undoes that, " +
		"safemode shows, enters, leaves or waits out the master's safe mode (no chunk created, no re-replication)",
	example: "  chunkfs admin report\n  chunkfs admin report --json | jq '.servers[] | select(.alive | not)'\n" +
		"  chunkfs admin fsck /data\n  chunkfs admin ha\n  chunkfs admin ha transfer-leader m2\n" +
		"  chunkfs admin balance start --threshold 5\n  chunkfs admin decommission cs3\n  chunkfs admin recommission cs3\n" +
		"  chunkfs admin safemode leave\n  chunkfs admin safemode wait --timeout 5m",
	run: runAdmin,
}

func runAdmin(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e)
	cf := addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	statusAddr := fs.String("http", "", "report: the master's status address (its --http), for the heap and rates of Tables 2 and 3")
	threshold := fs.Float64("threshold", 0, "balance start: percentage points around the mean utilisation every server is brought within (default: the master's, 10)")
	timeout := fs.Duration("timeout", 0, "safemode wait: give up (exit status 1) after this long (default: wait until safe mode ends)")
	ops, err := parse(e, fs, args)
	if err != nil {
		return err
	}
	thresholdSet, timeoutSet := false, false
	fs.Visit(func(f *flag.Flag) {
		thresholdSet = thresholdSet || f.Name == "threshold"
		timeoutSet = timeoutSet || f.Name == "timeout"
	})
	if thresholdSet && (len(ops) == 0 || ops[0] != "balance") {
		return usagef("--threshold goes with admin balance start")
	}
	if timeoutSet && (len(ops) == 0 || ops[0] != "safemode") {
		return usagef("--timeout goes with admin safemode wait")
	}
	if len(ops) > 0 {
		switch ops[0] {
		case "safemode":
			return runSafeMode(ctx, e, cf, *asJSON, *timeout, timeoutSet, ops[1:])
		case "balance":
			return runBalance(ctx, e, cf, *asJSON, *threshold, thresholdSet, ops[1:])
		case "decommission", "recommission":
			return runDecommission(ctx, e, cf, *asJSON, ops[0] == "recommission", ops[1:])
		}
	}
	if len(ops) > 0 && ops[0] == "fsck" {
		return runFsck(ctx, e, cf, *asJSON, ops[1:])
	}
	if len(ops) > 0 && ops[0] == "ha" {
		return runHA(ctx, e, cf, *asJSON, ops[1:])
	}
	if len(ops) != 1 || ops[0] != "report" {
		return usagef("unknown admin command %q; known: report, fsck, ha, balance, decommission, recommission, safemode", fmt.Sprint(ops))
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.ClusterReport(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, r)
	}
	tables, err := reportTables(ctx, *statusAddr, r)
	if err != nil {
		return err
	}
	printTables(e.stdout, tables)
	printReport(e.stdout, r)
	return nil
}

// printReport prints the cluster's figures and a table of chunkservers.
// Space counts each disk once, however many servers share it.
func printReport(w io.Writer, r *client.Report) {
	alive := 0
	for _, s := range r.Servers {
		if s.Alive {
			alive++
		}
	}
	capacity, used, free := r.Space()
	fmt.Fprintf(w, "Chunkservers:      %d alive, %d dead\n", alive, len(r.Servers)-alive)
	fmt.Fprintf(w, "Capacity:          %s (the live servers' disks, each counted once)\n", humanSize(capacity))
	fmt.Fprintf(w, "Used by chunks:    %s (%s)\n", humanSize(used), percent(used, capacity))
	fmt.Fprintf(w, "Free:              %s (%s)\n", humanSize(free), percent(free, capacity))
	fmt.Fprintf(w, "Files:             %d\n", r.Files)
	fmt.Fprintf(w, "Directories:       %d\n", r.Directories)
	fmt.Fprintf(w, "Dead (in trash):   %d files, %d directories, %d chunks, %s\n", r.DeadFiles, r.DeadDirectories, r.DeadChunks, humanSize(r.DeadBytes))
	fmt.Fprintf(w, "Chunks:            %d (%d under-replicated, %d missing, %d corrupt replicas)\n", r.Chunks, r.UnderReplicated, r.Missing, r.Corrupt)
	if r.MissingHeldBack > 0 {
		fmt.Fprintf(w, "Held back:         %d of the missing chunks have only copies held back (they may lack acknowledged writes)\n", r.MissingHeldBack)
	}
	fmt.Fprintf(w, "Repair:            %d being cloned, %s/s over the last minute, %d clones since start\n", r.BeingCloned, humanSize(int64(r.RepairRate)), r.Repaired)
	if b := r.Balance; b != nil {
		state := "stopped"
		if b.Running {
			state = "running"
		}
		fmt.Fprintf(w, "Balancer:          %s (threshold %g points), spread %.1f points, %d moves in flight, %d replicas moved\n",
			state, b.Threshold, b.Spread, b.MovesInFlight, b.Moved)
	}
	if r.SafeMode {
		fmt.Fprintf(w, "Safe mode:         on (%s); no chunk is created until it ends\n", r.SafeModeReason)
	}
	fmt.Fprintf(w, "File data:         %s\n", humanSize(r.Bytes))
	fmt.Fprintf(w, "Chunk size:        %s\n\n", humanSize(r.ChunkSize))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tRACK\tSTATE\tCHUNKS\tUSED\tFREE\tCAPACITY\tLOAD\tHEARTBEAT")
	for _, s := range r.Servers {
		state := serverState(s)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s ago\n", s.ID, s.Addr, s.Rack, state, s.Chunks,
			humanSize(s.Used), humanSize(s.Free), humanSize(s.Capacity), s.Load, s.LastHeartbeat.Round(time.Millisecond))
	}
	tw.Flush()
}

// percent formats n as a share of total.
func percent(n, total int64) string {
	if total <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
}

// serverState is a server's state as the report's table shows it.
func serverState(s client.ServerStatus) string {
	switch {
	case s.State == "decommissioning":
		return fmt.Sprintf("decommissioning (%d left)", s.DrainRemaining)
	case s.State != "":
		return drainState(s.State)
	case s.Alive:
		return "live"
	}
	return "dead"
}
