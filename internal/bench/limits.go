package bench

import (
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
