package metadata

import (
	"fmt"
	"math"
)

// The namespace `bench metadata` builds: files of 1 to maxFileChunks
// chunks, in directories of filesPerDir files under /clusterb.
const (
	shapeRoot     = "/clusterb"
	filesPerDir   = 100
	maxFileChunks = 64
)

// shape is a planned namespace of Cluster B's shape: how many chunks each
// file has and how long it is. It is computed, not random, so that a run
// and its checks agree.
type shape struct {
	chunkSize int64
	chunks    []int // chunks of file i
	total     int   // chunks of all files
	spread    int   // dead files: the live shape's directories they are dealt over; 0: live files
}

// newShape plans files files holding chunks chunks in all. GFS gives only
// the totals (Cluster B: 1.6 chunks a file, dead ones counted; "its
// files tend to be larger"), so the counts follow a geometric distribution of that mean,
// by quantile (file i takes the (i+½)/files quantile), cut at
// maxFileChunks, and corrected by one chunk here and there to the exact
// total.
func newShape(files, chunks int, chunkSize int64) shape {
	s := shape{chunkSize: chunkSize, chunks: make([]int, files)}
	p := float64(files) / float64(chunks) // a geometric distribution's mean is 1/p
	for i := range s.chunks {
		k := 1
		if p < 1 {
			u := (float64(i) + 0.5) / float64(files)
			k = int(math.Ceil(math.Log(1-u) / math.Log(1-p)))
		}
		s.chunks[i] = min(max(k, 1), maxFileChunks)
		s.total += s.chunks[i]
	}
	// Spread the correction over the files, in a stride coprime with
	// their number, so that no one run of files takes it all.
	for i := 0; s.total != chunks; i = (i + 7919) % files {
		switch {
		case s.total < chunks && s.chunks[i] < maxFileChunks:
			s.chunks[i]++
			s.total++
		case s.total > chunks && s.chunks[i] > 1:
			s.chunks[i]--
			s.total--
		}
	}
	return s
}

// deadShape plans files dead files holding chunks chunks, dealt over
// live's directories (file i in directory i mod their number), among the
// live files: the files `bench metadata` deletes into the trash.
func deadShape(live shape, files, chunks int) shape {
	s := newShape(files, chunks, live.chunkSize)
	s.spread = live.dirs()
	return s
}

func (s shape) files() int { return len(s.chunks) }
func (s shape) dirs() int  { return (s.files() + filesPerDir - 1) / filesPerDir }

func dirPath(d int) string { return fmt.Sprintf("%s/d%05d", shapeRoot, d) }

// filePath is file i's path.
func (s shape) filePath(i int) string {
	if s.spread > 0 {
		return fmt.Sprintf("%s/x%03d", dirPath(i%s.spread), i/s.spread)
	}
	return fmt.Sprintf("%s/f%03d", dirPath(i/filesPerDir), i%filesPerDir)
}

// lastLength is the length of file i's last chunk: between a thousandth
// of a chunk and a whole one, spread evenly by a multiplicative hash.
func (s shape) lastLength(i int) int64 {
	q := (uint64(i)*2654435761)%1000 + 1
	return s.chunkSize * int64(q) / 1000
}

// chunkLength is the length of chunk index of file i.
func (s shape) chunkLength(i, index int) int64 {
	if index < s.chunks[i]-1 {
		return s.chunkSize
	}
	return s.lastLength(i)
}

// fileLength is file i's length.
func (s shape) fileLength(i int) int64 {
	return int64(s.chunks[i]-1)*s.chunkSize + s.lastLength(i)
}

// bytes is the data of every file.
func (s shape) bytes() int64 {
	var n int64
	for i := range s.chunks {
		n += s.fileLength(i)
	}
	return n
}
