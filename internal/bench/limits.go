package bench

import (
	"errors"
	"fmt"
	"strings"
)

// Rate is a network rate in bits per second.
type Rate float64

// Mbit is one megabit per second.
const Mbit Rate = 1e6

// MBps returns the rate in megabytes (10^6 bytes) per second, the unit of the
// paper's Figure 3 (100 Mbps = 12.5 MB/s).
func (r Rate) MBps() float64 { return float64(r) / 8 / 1e6 }

// TCArg formats the rate for tc ("10000000bit").
func (r Rate) TCArg() string { return fmt.Sprintf("%.0fbit", float64(r)) }

func (r Rate) String() string { return fmt.Sprintf("%g Mbit/s", float64(r/Mbit)) }

// Workload is one of the paper's three experiments.
type Workload string

// The three workloads of Figure 3.
const (
	Reads   Workload = "reads"
	Writes  Workload = "writes"
	Appends Workload = "appends"
)

// Workloads lists the workloads in the order of Figure 3's panels.
var Workloads = []Workload{Reads, Writes, Appends}

// ParseWorkloads parses a comma-separated list of workload names.
func ParseWorkloads(s string) ([]Workload, error) {
	var out []Workload
	for _, f := range strings.Split(s, ",") {
		w := Workload(strings.TrimSpace(f))
		switch w {
		case Reads, Writes, Appends:
			out = append(out, w)
		default:
			return nil, fmt.Errorf("unknown workload %q (want reads, writes or appends)", f)
		}
	}
	return out, nil
}

// Network is what the theoretical limits are derived from: the rates the
// testbed shapes to, the number of chunkservers and the replication factor.
type Network struct {
	NIC          Rate // every host's NIC, each direction
	Link         Rate // the link between the two switches, each direction
	Chunkservers int
	Replicas     int
}

// Limit is the theoretical limit of the aggregate rate, in MB/s, of N clients
// running workload w, derived as in the paper's section 6.1:
//
//   - reads: min(N × NIC, link) — each client's NIC or the inter-switch link;
//   - writes: each byte goes to Replicas of the chunkservers, so the input
//     capacity of the chunkservers divided by Replicas, and also no more than
//     min(N × NIC, link), the rate at which the clients can send it;
//   - appends: the NIC of the chunkservers holding the last chunk (every
//     replica of it must receive every byte), and no more than the clients
//     can send.
func (n Network) Limit(w Workload, clients int) float64 {
	send := min(float64(clients)*n.NIC.MBps(), n.Link.MBps())
	switch w {
	case Writes:
		return min(send, float64(n.Chunkservers)*n.NIC.MBps()/float64(n.Replicas))
	case Appends:
		return min(send, n.NIC.MBps())
	default:
		return send
	}
}

// The rules the limits follow, as the report prints them.
const (
	RuleReads  = "min(N × NIC, link)"
	RuleWrites = "min(N × NIC, link, chunkservers × NIC / replicas)"
	// RuleAppends is the limit of AppendLimit: the servers that received
	// the records, each at most a NIC's rate.
	RuleAppends = "min(N × NIC, link, NIC × bytes / bytes received by the busiest server)"
	// RuleAppendsOneChunk is Limit's for appends, used when it is not known
	// where the records landed: it holds only while every record goes to
	// one chunk's servers.
	RuleAppendsOneChunk = "min(N × NIC, link, NIC): one chunk's servers (where the records landed is unknown)"
)

// Rule names the rule Limit follows for w.
func (n Network) Rule(w Workload) string {
	switch w {
	case Writes:
		return RuleWrites
	case Appends:
		return RuleAppendsOneChunk
	default:
		return RuleReads
	}
}

// AppendLimit is the limit, in MB/s, of N clients appending bytes in all
// when server s received received[s] of them (each replica of a chunk
// receives every record that landed in it). A server takes at most a NIC's
// rate, so the records take at least the busiest server's bytes / NIC; so
// the rate is at most NIC × bytes / that server's bytes, and no more than
// the clients can send. While records go to one chunk, every replica of it
// receives all of them and this is Limit's NIC; records that spill onto the
// file's next chunk reach that chunk's servers too, and the limit rises
// with them.
func (n Network) AppendLimit(clients int, bytes int64, received map[string]int64) (float64, error) {
	var busiest int64
	for _, b := range received {
		busiest = max(busiest, b)
	}
	if bytes <= 0 || busiest <= 0 {
		return 0, errors.New("append limit: no bytes received")
	}
	if busiest > bytes {
		return 0, fmt.Errorf("append limit: a server received %d bytes of %d appended", busiest, bytes)
	}
	send := min(float64(clients)*n.NIC.MBps(), n.Link.MBps())
	return min(send, n.NIC.MBps()*float64(bytes)/float64(busiest)), nil
}

// receivedBytes adds up, per chunkserver, the bytes of the records that
// landed in each chunk (landed: bytes by chunk index) of the file whose
// chunks are located in byChunk: every replica of a chunk received them.
// A chunk with records but no known replicas is an error: the limit would
// leave out servers that took data.
func receivedBytes(landed map[int64]int64, byChunk []ChunkReplicas) (map[string]int64, error) {
	replicas := make(map[int64][]string, len(byChunk))
	for _, c := range byChunk {
		replicas[c.Index] = c.Replicas
	}
	out := map[string]int64{}
	for idx, b := range landed {
		rs := replicas[idx]
		if len(rs) == 0 && b > 0 {
			return nil, fmt.Errorf("chunk %d took %d bytes of records but its replicas are unknown", idx, b)
		}
		for _, r := range rs {
			out[r] += b
		}
	}
	return out, nil
}
