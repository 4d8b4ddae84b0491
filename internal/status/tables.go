package status

import (
	"fmt"
	"time"

	"github.com/chunkfs/chunkfs"
)

// Server is one chunkserver as the master reports it.
type Server struct {
	Alive  bool
	Chunks int64
	Used   int64 // bytes of chunk data held
}

// Cluster is what Table 2 is computed from: the master's report (as
// client.Report carries it) and the master's own heap figure.
type Cluster struct {
	Servers          []Server
	Capacity, Used   int64 // of the live servers' distinct disks (client.Report.Space)
	Files, DeadFiles int64
	Chunks           int64
	// MasterMetadata is the heap the master's namespace and chunk registry
	// take, in bytes (an estimate from measured costs of each object);
	// negative when not known (the terminal without the status page).
	MasterMetadata int64
}

// Table2 is the GFS paper's Table 2 for one cluster.
type Table2 struct {
	Chunkservers        int   `json:"chunkservers"` // live ones
	DeadChunkservers    int   `json:"dead_chunkservers"`
	AvailableBytes      int64 `json:"available_bytes"` // capacity of the live servers' disks
	UsedBytes           int64 `json:"used_bytes"`      // chunk data held, every replica counted
	Files               int64 `json:"files"`
	DeadFiles           int64 `json:"dead_files"` // deleted, in the trash, not yet reclaimed
	Chunks              int64 `json:"chunks"`
	ChunkserverMetadata int64 `json:"chunkserver_metadata_bytes"`
	MasterMetadata      int64 `json:"master_metadata_bytes"` // -1: not known here
}

const blockSize = chunkfs.BlockSize

// MetaFileBytes is the size of the metadata file a chunkserver keeps for
// a chunk of length bytes: a 32-byte header, a CRC32C for each 64 KiB
// block and one for the file (chunkstore's format).
func MetaFileBytes(length int64) int64 {
	return 32 + 4*((length+blockSize-1)/blockSize) + 4
}

// NewTable2 computes Table 2. Metadata at chunkservers is what their
// reported chunks and bytes take in chunkstore's metadata format (each
// server's chunks, and its bytes in whole blocks).
func NewTable2(c Cluster) Table2 {
	t := Table2{AvailableBytes: c.Capacity, UsedBytes: c.Used, Files: c.Files, DeadFiles: c.DeadFiles,
		Chunks: c.Chunks, MasterMetadata: c.MasterMetadata}
	for _, s := range c.Servers {
		if !s.Alive {
			t.DeadChunkservers++
			continue
		}
		t.Chunkservers++
		t.ChunkserverMetadata += s.Chunks*(MetaFileBytes(0)) + 4*((s.Used+blockSize-1)/blockSize)
	}
	return t
}

// Row is one line of a table: a name and a value, formatted.
type Row struct{ Name, Value string }

// Rows returns Table 2 as the page and the terminal print it.
func (t Table2) Rows() []Row {
	master := "not known here (see the master's status page)"
	if t.MasterMetadata >= 0 {
		master = Bytes(t.MasterMetadata)
	}
	chunkservers := fmt.Sprint(t.Chunkservers)
	if t.DeadChunkservers > 0 {
		chunkservers += fmt.Sprintf(" (%d dead)", t.DeadChunkservers)
	}
	return []Row{
		{"Chunkservers", chunkservers},
		{"Available disk space", Bytes(t.AvailableBytes)},
		{"Used disk space", Bytes(t.UsedBytes)},
		{"Number of files", fmt.Sprint(t.Files)},
		{"Number of dead files", fmt.Sprint(t.DeadFiles)},
		{"Number of chunks", fmt.Sprint(t.Chunks)},
		{"Metadata at chunkservers", Bytes(t.ChunkserverMetadata)},
		{"Metadata at master", master},
	}
}

// Table3 is the GFS paper's Table 3: rates over three periods.
type Table3 struct {
	Minute  Rate `json:"last_minute"`
	Hour    Rate `json:"last_hour"`
	Start   Rate `json:"since_restart"`
	Traffic bool `json:"traffic_known"` // read and write rates are known (else only operations)
}

// NewTable3 computes Table 3 from r.
func NewTable3(r *Rates, traffic bool) Table3 {
	return Table3{Minute: r.Over(time.Minute), Hour: r.Over(time.Hour), Start: r.SinceStart(), Traffic: traffic}
}

// Rows returns Table 3 as printed: a header and three rows of rates.
func (t Table3) Rows() (header []string, rows [][]string) {
	header = []string{"", "Last minute", "Last hour", "Since restart"}
	rate := func(f func(Rate) string) []string {
		return []string{f(t.Minute), f(t.Hour), f(t.Start)}
	}
	unknown := func(Rate) string { return "not reported" }
	read, write := func(r Rate) string { return Bytes(int64(r.ReadBytes)) + "/s" }, func(r Rate) string { return Bytes(int64(r.WrittenBytes)) + "/s" }
	if !t.Traffic {
		read, write = unknown, unknown
	}
	rows = [][]string{
		append([]string{"Read rate"}, rate(read)...),
		append([]string{"Write rate"}, rate(write)...),
		append([]string{"Master ops"}, rate(func(r Rate) string { return fmt.Sprintf("%.1f Ops/s", r.Ops) })...),
	}
	return header, rows
}

// Bytes formats n bytes in binary units, as the tables print them.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
