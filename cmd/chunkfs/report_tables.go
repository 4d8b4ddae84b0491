package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/status"
	"github.com/chunkfs/chunkfs/internal/web"
)

// reportTables computes Tables 2 and 3 for `admin report`. The report
// alone gives Table 2 less the master's heap; with statusAddr (the
// master's --http address) both tables come from its page, computed by
// the same code.
func reportTables(ctx context.Context, statusAddr string, r *client.Report) (*web.Tables, error) {
	if statusAddr == "" {
		return &web.Tables{Table2: status.NewTable2(web.ClusterOf(r, -1))}, nil
	}
	url := statusAddr
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(url, "/")+"/api/tables", nil)
	if err != nil {
		return nil, usagef("--http %s: %v", statusAddr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the master's status page at %s: %v", statusAddr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("the master's status page at %s: %s: %s", statusAddr, resp.Status, strings.TrimSpace(string(b)))
	}
	var t web.Tables
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&t); err != nil {
		return nil, fmt.Errorf("the master's status page at %s: %v", statusAddr, err)
	}
	return &t, nil
}

// printTables prints Table 2 and, when known, Table 3 as the status page
// shows them.
func printTables(w io.Writer, t *web.Tables) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Table 2 (as in the GFS paper)")
	for _, row := range t.Table2.Rows() {
		fmt.Fprintf(tw, "  %s\t%s\n", row.Name, row.Value)
	}
	if t.Table3.Start.Over > 0 {
		header, rows := t.Table3.Rows()
		fmt.Fprintln(tw, "\nTable 3 (as in the GFS paper)")
		fmt.Fprintf(tw, "  %s\n", strings.Join(header, "\t"))
		for _, r := range rows {
			fmt.Fprintf(tw, "  %s\n", strings.Join(r, "\t"))
		}
	} else {
		fmt.Fprintln(tw, "\nTable 3 (read, write and operation rates): give --http, the master's status address")
	}
	fmt.Fprintln(tw)
	tw.Flush()
}
