package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/chunkfs/chunkfs/client"
)

// Placement summarises where the replicas of a set of files are: how evenly
// the chunkservers share them decides how much of the chunkservers' NICs a
// workload can use at once.
type Placement struct {
	Chunks   int            `json:"chunks"`
	Replicas map[string]int `json:"replicas"` // chunkserver address → replicas it holds
	// Forwards counts, per chunkserver, the chunks whose replicas the
	// master lists it in but not last: in the chain the master orders and
	// writers follow (internal/master/chain_order.go), it forwards their
	// data to the next replica.
	Forwards map[string]int `json:"forwards,omitempty"`
	// ByChunk lists each chunk's replicas, when the locate task was asked
	// to (Task.PerChunk).
	ByChunk []ChunkReplicas `json:"by_chunk,omitempty"`
}

// ChunkReplicas is where one chunk of a file is.
type ChunkReplicas struct {
	File     string   `json:"file"`
	Index    int64    `json:"index"`
	Replicas []string `json:"replicas"`
}

// Busiest returns the most replicas any one chunkserver holds.
func (p *Placement) Busiest() int {
	m := 0
	for _, n := range p.Replicas {
		m = max(m, n)
	}
	return m
}

func (p *Placement) String() string {
	if p == nil {
		return "-"
	}
	total := 0
	for _, n := range p.Replicas {
		total += n
	}
	return fmt.Sprintf("%d chunks: %d replicas on %d servers, busiest %d", p.Chunks, total, len(p.Replicas), p.Busiest())
}

// locateTask asks the master where each chunk of files is.
type locateTask struct {
	sec    *client.Security
	master string
	files  []string
	chunks bool // list each chunk's replicas too (Placement.ByChunk)
}

func (l *locateTask) close() error { return nil }

func (l *locateTask) run(ctx context.Context) (Result, error) {
	c, err := dialClient(ctx, l.sec, l.master, 0, nil)
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	start := time.Now()
	pl := &Placement{Replicas: map[string]int{}, Forwards: map[string]int{}}
	for _, f := range l.files {
		chunks, err := c.Chunks(ctx, f)
		if err != nil {
			return Result{}, err
		}
		pl.add(f, chunks, l.chunks)
	}
	return Result{Ops: int64(len(l.files)), StartNS: start.UnixNano(), EndNS: time.Now().UnixNano(), Placement: pl}, nil
}

// add counts the replicas of the chunks of file f, and lists them by chunk
// if byChunk.
func (pl *Placement) add(f string, chunks []client.ChunkInfo, byChunk bool) {
	for _, c := range chunks {
		pl.Chunks++
		for i, r := range c.Replicas {
			pl.Replicas[r]++
			if i < len(c.Replicas)-1 {
				pl.Forwards[r]++
			}
		}
		if byChunk {
			pl.ByChunk = append(pl.ByChunk, ChunkReplicas{File: f, Index: c.Index, Replicas: c.Replicas})
		}
	}
}

// locate finds where the replicas of files are; a failure is logged, not
// fatal: placement explains a figure, it is not one. With byChunk it
// lists each chunk's replicas too.
func (s *session) locate(ctx context.Context, files []string, byChunk bool) *Placement {
	task := Task{Op: OpLocate, Master: s.cl.master, TLSDir: s.cl.tlsDir, Files: files, PerChunk: byChunk, Timeout: time.Minute}
	res, err := runWorkers(ctx, s.cfg, s.tb.Clients[:1], []Task{task}, s.dir, "locate")
	if err != nil || res[0].Placement == nil {
		s.log.Warn("could not locate replicas", "err", err)
		return nil
	}
	return res[0].Placement
}

// filesOf lists the distinct files a point's tasks wrote or read.
func (s *session) filesOf(tasks []Task) []string {
	var files []string
	for _, t := range tasks {
		if t.Path != "" {
			files = append(files, t.Path)
		}
	}
	if len(files) == 0 {
		return s.readSet()
	}
	slices.Sort(files)
	return slices.Compact(files)
}
