package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sampleReport is the paper's own Figure 3, read off its text, at full scale.
func sampleReport() *Report {
	r := &Report{Scale: 1, NICMbit: 100, LinkMbit: 1000, Servers: 16, Replicas: 3}
	net := Network{NIC: 100 * Mbit, Link: 1000 * Mbit, Chunkservers: 16, Replicas: 3}
	measured := map[Workload][]float64{
		Reads:   {10, 19, 37, 70, 94},
		Writes:  {6.3, 12, 22, 30, 35},
		Appends: {6.0, 5.8, 5.5, 5.1, 4.8},
	}
	panels := []Panel{{Reads, 64 * MiB, false}, {Writes, 64 * MiB, false}, {Appends, 64 * MiB, false}, {Writes, MiB, true}}
	for _, pn := range panels {
		for i, n := range []int{1, 2, 4, 8, 16} {
			w := pn.Workload
			p := Point{Workload: w, Clients: n, Aggregate: measured[w][i], Limit: net.Limit(w, n), LimitRule: net.Rule(w), Seconds: 10,
				ChunkSize: pn.ChunkSize, Variant: pn.Variant}
			if pn.Variant {
				p.Aggregate *= 1.2
			}
			if w == Appends && n == 16 {
				p.LimitRule = RuleAppends
			}
			p.PerClient = p.Aggregate / float64(n)
			p.Efficiency = p.Aggregate / p.Limit
			p.Bytes = int64(p.Aggregate * 1e7)
			r.Points = append(r.Points, p)
		}
	}
	r.Points = append(r.Points, Point{Workload: Appends, Clients: 32, Limit: 12.5, LimitRule: RuleAppendsOneChunk, ChunkSize: 64 * MiB, Err: "worker 3: unavailable"})
	return r
}

func TestWritePNG(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("CHUNKFS_BENCH_PNG_DIR"); dir != "" {
		os.WriteFile(dir+"/sample.png", buf.Bytes(), 0o644)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 3*panelW || b.Dy() != panelH {
		t.Fatalf("image is %v, want three %dx%d panels", b, panelW, panelH)
	}
}

// The SVG is the same figure: three panels, their titles, the variant's
// series labelled in the writes' panel.
func TestWriteSVG(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name `xml:"svg"`
		Width   string   `xml:"width,attr"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not SVG: %v", err)
	}
	for _, text := range []string{"(a) Reads, 64 MiB chunks", "(b) Writes, 64 MiB chunks", "(c) Record appends, 64 MiB chunks",
		"Aggregate rate, 1 MiB chunks (variant)", "Network limit"} {
		if !strings.Contains(buf.String(), text) {
			t.Errorf("SVG lacks %q", text)
		}
	}
	if dir := os.Getenv("CHUNKFS_BENCH_PNG_DIR"); dir != "" {
		os.WriteFile(dir+"/sample.svg", buf.Bytes(), 0o644)
	}
}

// A figure in an unknown format is refused, not written.
func TestWriteFigureFormat(t *testing.T) {
	var buf bytes.Buffer
	if err := writeFigure(&buf, "gif", sampleReport().figurePanels()); err == nil || buf.Len() != 0 {
		t.Fatalf("gif: %v, %d bytes written", err, buf.Len())
	}
}

// SaveFiles writes the table's CSV and the figure; the JSON of every
// event only when asked.
func TestSaveFiles(t *testing.T) {
	for _, events := range []bool{false, true} {
		dir := t.TempDir()
		paths, err := sampleReport().SaveFiles(dir, events)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"gfs.csv", "gfs.png", "gfs.svg"}
		if events {
			want = append(want, "gfs.json")
		}
		var got []string
		for _, p := range paths {
			got = append(got, filepath.Base(p))
		}
		if !slices.Equal(got, want) {
			t.Errorf("events %v: wrote %v, want %v", events, got, want)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != len(want) {
			t.Errorf("events %v: %d files in the directory, want %d", events, len(entries), len(want))
		}
	}
}

func TestWriteTableCSVJSON(t *testing.T) {
	r := sampleReport()
	var tab, c, j bytes.Buffer
	if err := r.WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tab.String(), "75.2%") || !strings.Contains(tab.String(), "FAILED: worker 3") {
		t.Errorf("table lacks the reads N=16 efficiency or the failed point:\n%s", tab.String())
	}
	for _, row := range []string{"reads  64 MiB  16", "writes  64 MiB   1", "writes (variant)   1 MiB   1",
		"writes, 64 MiB chunks (headline): limit " + RuleWrites,
		"writes, 1 MiB chunks (labelled variant): limit " + RuleWrites,
		"appends, 64 MiB chunks (headline): limit " + RuleAppendsOneChunk + " at N = 1,2,4,8,32; " + RuleAppends + " at N = 16"} {
		if !strings.Contains(tab.String(), row) {
			t.Errorf("table lacks %q:\n%s", row, tab.String())
		}
	}
	if err := r.WriteCSV(&c); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&c).ReadAll()
	if err != nil || len(rows) != len(r.Points)+1 || rows[0][0] != "workload" {
		t.Fatalf("CSV: %d rows, err %v", len(rows), err)
	}
	if rows[1][1] != "67108864" || rows[6][1] != "67108864" || rows[16][1] != "1048576" || rows[16][11] != "true" || rows[16][12] != RuleWrites {
		t.Errorf("CSV rows %q (reads), %q (writes), %q (the writes' variant)", rows[1], rows[6], rows[16])
	}
	if err := r.WriteJSON(&j); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(j.Bytes(), &back); err != nil || len(back.Points) != len(r.Points) || back.Points[4].Aggregate != 94 {
		t.Fatalf("JSON round trip: %v, %+v", err, back.Points)
	}
}
