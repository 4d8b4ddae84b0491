package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/chunkfs/chunkfs/client"
)

// runFsck runs `chunkfs admin fsck [PATH] [--json]`, like hdfs fsck: one
// line per file with its status (HEALTHY, UNDER-REPLICATED, CORRUPT,
// MISSING) and chunk counts, then the totals. It fails (exit status 1)
// when any chunk is missing: no live replica at its current version.
// Under-replicated and corrupt replicas are being healed; they are shown,
// not failed on.
func runFsck(ctx context.Context, e *env, cf *clientFlags, asJSON bool, ops []string) error {
	if len(ops) > 1 {
		return usagef("admin fsck takes at most one PATH")
	}
	p := "/"
	if len(ops) == 1 {
		p = ops[0]
	}
	c, err := cf.connect(ctx, e)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.Fsck(ctx, p)
	if err != nil {
		return err
	}
	if asJSON {
		if r.Files == nil {
			r.Files = []client.FsckFile{}
		}
		if err := writeJSON(e.stdout, r); err != nil {
			return err
		}
	} else if err := printFsck(e, p, r); err != nil {
		return err
	}
	if !r.Good() {
		return fmt.Errorf("%d chunks missing under %s: no live replica holds their current version", r.Missing, p)
	}
	return nil
}

func printFsck(e *env, p string, r *client.FsckReport) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tREPL\tCHUNKS\tHEALTHY\tUNDER\tMISSING\tCORRUPT\tPATH")
	for i := range r.Files {
		f := &r.Files[i]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", f.Status(), f.Replication, f.Chunks, f.Healthy,
			f.UnderReplicated, f.Missing, f.Corrupt, f.Path)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	status := "HEALTHY"
	switch {
	case r.Missing > 0:
		status = "CORRUPT (chunks missing)"
	case r.UnderReplicated > 0 || r.Corrupt > 0:
		status = "HEALTHY, healing"
	}
	w := e.stdout
	fmt.Fprintf(w, "\nStatus:            %s\n", status)
	fmt.Fprintf(w, "Files checked:     %d under %s", r.FilesChecked, p)
	if r.Truncated {
		fmt.Fprint(w, " (the master's maximum; check a smaller tree for the rest)")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Chunks:            %d\n", r.Chunks)
	fmt.Fprintf(w, "Healthy:           %d\n", r.Healthy)
	fmt.Fprintf(w, "Under-replicated:  %d\n", r.UnderReplicated)
	fmt.Fprintf(w, "Missing:           %d\n", r.Missing)
	if r.MissingHeldBack > 0 {
		fmt.Fprintf(w, "  held back:       %d (their only copies left the replicas counted under a lease and may lack acknowledged writes)\n", r.MissingHeldBack)
	}
	fmt.Fprintf(w, "Corrupt replicas:  %d\n", r.Corrupt)
	if r.SafeMode {
		fmt.Fprintln(w, "Safe mode:         on (chunk locations are still being reported; missing counts may fall)")
	}
	return nil
}
