package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the report: a row per phase and process count, with
// the rate through the mount, issue 18's target and the rate on the local
// directory measured in the same run.
func (r *SmallReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "chunkfs bench smallfile: %d files of %d bytes in one directory; worker processes making syscalls\n", r.Files, r.Size)
	fmt.Fprintf(w, "mount: %s\nlocal: %s (%s)\n", r.Mount, r.Local, r.LocalFS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tprocs\tchunkfs ops/s\ttarget\tmet\tlocal ops/s\tof local\t")
	for _, row := range r.Rows {
		met := "no"
		if row.Rate >= row.Target {
			met = "yes"
		}
		of := "-"
		if row.Local > 0 {
			of = fmt.Sprintf("%.1f%%", 100*row.Rate/row.Local)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%s\t%.0f\t%s\t\n", row.Phase, row.Procs, row.Rate, row.Target, met, row.Local, of)
	}
	return tw.Flush()
}
