package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MetaOp is one metadata operation of the observer-reads workload.
type MetaOp string

// The workload's operations: reads, which observers may serve, and writes,
// which only the leader takes.
const (
	MetaStat   MetaOp = "stat"      // Stat of one of the client's own names
	MetaList   MetaOp = "list"      // ReadDir of the client's own directory
	MetaChunks MetaOp = "getchunks" // Chunks of a file of the shared read set
	MetaCreate MetaOp = "create"    // create an empty file
	MetaMkdir  MetaOp = "mkdir"
	MetaRename MetaOp = "rename" // rename one of the client's names to a new one
	MetaDelete MetaOp = "delete" // remove a file or empty directory
)

// metaOps is every operation, reads first, in the order mixes are written.
var metaOps = []MetaOp{MetaStat, MetaList, MetaChunks, MetaCreate, MetaMkdir, MetaRename, MetaDelete}

// IsRead reports whether op is a read (a coordinated read: observers may
// serve it).
func (op MetaOp) IsRead() bool { return op == MetaStat || op == MetaList || op == MetaChunks }

// Mix is the share of each operation in a workload, in percent (any
// positive weights; they need not add to 100).
type Mix map[MetaOp]float64

// DefaultMix is the workload the HDFS-12943 experiment's production traces
// stand for: mostly reads. 90 % reads — stat 45, getchunks 30, list 15 —
// and 10 % writes — create 3, mkdir 1, rename 2, delete 4, so that a
// client's names are created and removed at the same rate and its
// directory (what list reads) keeps its size.
func DefaultMix() Mix {
	return Mix{MetaStat: 45, MetaChunks: 30, MetaList: 15, MetaCreate: 3, MetaMkdir: 1, MetaRename: 2, MetaDelete: 4}
}

// total is the sum of the weights.
func (m Mix) total() float64 {
	t := 0.0
	for _, w := range m {
		t += w
	}
	return t
}

// ReadShare is the fraction of operations that are reads.
func (m Mix) ReadShare() float64 {
	r := 0.0
	for op, w := range m {
		if op.IsRead() {
			r += w
		}
	}
	return r / m.total()
}

// Writes returns the mix without its reads.
func (m Mix) Writes() Mix {
	out := Mix{}
	for op, w := range m {
		if !op.IsRead() {
			out[op] = w
		}
	}
	return out
}

// Pick returns the operation that u, uniform in [0, 1), falls on.
func (m Mix) Pick(u float64) MetaOp {
	x := u * m.total()
	last := MetaOp("")
	for _, op := range metaOps {
		w := m[op]
		if w <= 0 {
			continue
		}
		if x < w {
			return op
		}
		x -= w
		last = op
	}
	return last // rounding
}

// Validate reports a mix with an unknown operation, a negative weight or
// no weight at all.
func (m Mix) Validate() error {
	for op, w := range m {
		if !slices.Contains(metaOps, op) {
			return fmt.Errorf("mix: unknown operation %q", op)
		}
		if w < 0 {
			return fmt.Errorf("mix: negative weight %g for %s", w, op)
		}
	}
	if m.total() <= 0 {
		return fmt.Errorf("mix: no operation has a weight")
	}
	return nil
}

// String writes the mix as ParseMix reads it, in percent, reads first.
func (m Mix) String() string {
	var parts []string
	t := m.total()
	for _, op := range metaOps {
		if w := m[op]; w > 0 {
			parts = append(parts, fmt.Sprintf("%s=%s", op, strconv.FormatFloat(100*w/t, 'g', 4, 64)))
		}
	}
	return strings.Join(parts, ",")
}

// ParseMix reads "stat=45,getchunks=30,...".
func ParseMix(s string) (Mix, error) {
	m := Mix{}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		w, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("mix: %q is not op=weight", part)
		}
		m[MetaOp(name)] = w
	}
	return m, m.Validate()
}
