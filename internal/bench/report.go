package bench

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the report as an aligned table, one row a point, with
// the paper's own figures beside ours where it gives them.
func (r *Report) WriteTable(w io.Writer) error {
	transport := "plain TCP"
	if r.TLS {
		transport = "mutual TLS"
	}
	fmt.Fprintf(w, "chunkfs bench gfs: %d chunkservers, %d replicas, NICs %g Mbit/s, link %g Mbit/s (scale %g of the paper), %s\n",
		r.Servers, r.Replicas, r.NICMbit, r.LinkMbit, r.Scale, transport)
	for _, p := range r.Network {
		fmt.Fprintf(w, "raw TCP, %2d clients → chunkservers: %7.3f MB/s of %7.3f = %5.1f%%\n", p.Clients, p.Aggregate, p.Limit, 100*p.Efficiency)
	}
	if r.Probe != nil {
		fmt.Fprint(w, r.Probe.String())
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if r.ReadSet != nil {
		fmt.Fprintf(w, "read set: %s\n", r.ReadSet)
	}
	for _, l := range r.panelLines() {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(tw, "workload\tchunk\tN\tMB\tseconds\taggregate MB/s\tper client MB/s\tslowest client MB/s\tlimit MB/s\tefficiency\tGFS paper\treplicas: servers, busiest\t")
	for _, p := range r.Points {
		if p.Err != "" {
			fmt.Fprintf(tw, "%s\t%s\t%d\t\t\t\t\t\t%.3f\tFAILED: %s\t\t\n", p.series(), chunkLabel(p.ChunkSize), p.Clients, p.Limit, p.Err)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\t%.1f%%\t%s\t%s\t\n", p.series(), chunkLabel(p.ChunkSize), p.Clients,
			float64(p.Bytes)/1e6, p.Seconds, p.Aggregate, p.PerClient, p.Slowest, p.Limit, 100*p.Efficiency, paperEfficiency(p.Workload, p.Clients), spread(p.Placement))
	}
	return tw.Flush()
}

// series names the point's series in the table: its workload, and
// "(variant)" for a labelled variant of the panel.
func (p Point) series() string {
	if p.Variant {
		return string(p.Workload) + " (variant)"
	}
	return string(p.Workload)
}

// panelLines says, for each series of the report, which chunk size it ran
// on and which rule its limit follows (for each rule, the N it was used at,
// if not all).
func (r *Report) panelLines() []string {
	type series struct {
		w       Workload
		chunk   int64
		variant bool
	}
	var order []series
	rules := map[series][]string{}
	ns := map[series]map[string][]int{}
	for _, p := range r.Points {
		k := series{p.Workload, p.ChunkSize, p.Variant}
		if _, ok := ns[k]; !ok {
			order, ns[k] = append(order, k), map[string][]int{}
		}
		rule := cmp.Or(p.LimitRule, "not recorded")
		if _, ok := ns[k][rule]; !ok {
			rules[k] = append(rules[k], rule)
		}
		ns[k][rule] = append(ns[k][rule], p.Clients)
	}
	var out []string
	for _, k := range order {
		kind := "headline"
		if k.variant {
			kind = "labelled variant"
		}
		parts := make([]string, len(rules[k]))
		for i, rule := range rules[k] {
			parts[i] = rule
			if len(rules[k]) > 1 {
				parts[i] += fmt.Sprintf(" at N = %s", joinInts(ns[k][rule]))
			}
		}
		out = append(out, fmt.Sprintf("%s, %s chunks (%s): limit %s", k.w, chunkLabel(k.chunk), kind, strings.Join(parts, "; ")))
	}
	return out
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// paperEfficiency is the efficiency the GFS paper reports for a point, where
// its text gives one (section 6.1).
func paperEfficiency(w Workload, n int) string {
	type key struct {
		w Workload
		n int
	}
	known := map[key]string{
		{Reads, 1}: "80%", {Reads, 16}: "75%",
		{Writes, 1}: "50%", {Writes, 16}: "52%",
		{Appends, 1}: "48%", {Appends, 16}: "38%",
	}
	if s, ok := known[key{w, n}]; ok {
		return s
	}
	return "-"
}

// spread is a point's placement in a table cell.
func spread(p *Placement) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%d, %d", len(p.Replicas), p.Busiest())
}

// chunkLabel names a chunk size.
func chunkLabel(n int64) string {
	if n%MiB == 0 {
		return fmt.Sprintf("%d MiB", n/MiB)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

var csvHeader = []string{"workload", "chunk_size", "clients", "bytes", "seconds", "aggregate_mbps", "per_client_mbps", "slowest_client_mbps", "limit_mbps", "efficiency", "error", "variant", "limit_rule"}

// WriteCSV writes one row a point, with a header.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	for _, p := range r.Points {
		cw.Write([]string{string(p.Workload), strconv.FormatInt(p.ChunkSize, 10), strconv.Itoa(p.Clients), strconv.FormatInt(p.Bytes, 10),
			ff(p.Seconds), ff(p.Aggregate), ff(p.PerClient), ff(p.Slowest), ff(p.Limit), ff(p.Efficiency), p.Err,
			strconv.FormatBool(p.Variant), p.LimitRule})
	}
	cw.Flush()
	return cw.Error()
}

func ff(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }

// WriteJSON writes the whole report.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// SaveFiles writes gfs.csv and the figure (gfs.png, gfs.svg) into dir,
// and with events gfs.json too (the whole report, every client's
// operation times and trace events: megabytes), and returns their paths.
func (r *Report) SaveFiles(dir string, events bool) ([]string, error) {
	outs := []output{{"gfs.csv", r.WriteCSV}, {"gfs.png", r.WritePNG}, {"gfs.svg", r.WriteSVG}}
	if events {
		outs = append(outs, output{"gfs.json", r.WriteJSON})
	}
	return saveOutputs(dir, outs)
}

// output is a file a report writes.
type output struct {
	name  string
	write func(io.Writer) error
}

// saveOutputs writes each of outs into dir and returns their paths.
func saveOutputs(dir string, outs []output) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, o := range outs {
		p := filepath.Join(dir, o.name)
		if err := saveFile(p, o.write); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func saveFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}
