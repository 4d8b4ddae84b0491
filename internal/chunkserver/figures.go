package chunkserver

import (
	"sync/atomic"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/status"
)

// traffic counts what the server's figures report of its work: bytes on
// the data stream and the scrubber's progress. Its counters only grow.
type traffic struct {
	read     atomic.Int64 // chunk bytes read for readers and clones
	written  atomic.Int64 // pushed bytes accepted whole
	scrubbed atomic.Int64 // chunks the scrubber has verified
	cursor   atomic.Uint64
}

// counted wraps a push's done so that n bytes count as written once the
// push is whole.
func (t *traffic) counted(n int64, done func([]uint32, bool)) func([]uint32, bool) {
	return func(sums []uint32, ok bool) {
		if ok {
			t.written.Add(n)
		}
		done(sums, ok)
	}
}

func (t *traffic) scrubbedTo(h chunkfs.Handle) {
	t.scrubbed.Add(1)
	t.cursor.Store(uint64(h))
}

// Figures is what a chunkserver reports to its metrics and status page.
type Figures struct {
	ID, Addr, Rack string
	Disks          []DiskFigures
	Chunks         int
	Corrupt        []chunkfs.Handle // replicas that failed a checksum and are still held
	Used           int64            // bytes of chunk data held
	MetadataBytes  int64            // bytes of the chunks' metadata files (version and block checksums)
	BufferUsed     int64            // pushed data held in memory
	BufferLimit    int64
	Load           int32 // operations in flight
	Clones         int   // clones running as a target
	BytesRead      int64 // since start, on the data stream
	BytesWritten   int64
	Reads          rpc.ReadTotals // data-stream reads since start, by kind (clients', clones', urgent clones')
	Scrubbed       int64          // chunks verified by the scrubber since start
	ScrubCursor    chunkfs.Handle // the last one verified
	ScrubInterval  time.Duration
}

// DiskFigures is one distinct disk of the server.
type DiskFigures struct {
	ID          string
	Total, Free int64
}

// Figures computes the server's figures now.
func (s *Server) Figures() Figures {
	f := Figures{ID: s.id, Addr: s.Addr(), Rack: s.cfg.Rack, Load: s.load.Load(),
		BufferUsed: s.buf.usage(), BufferLimit: s.cfg.BufferBytes,
		BytesRead: s.traffic.read.Load(), BytesWritten: s.traffic.written.Load(),
		Scrubbed: s.traffic.scrubbed.Load(), ScrubCursor: chunkfs.Handle(s.traffic.cursor.Load()),
		ScrubInterval: s.cfg.ScrubInterval, Clones: s.clones.running(), Reads: s.readTotals()}
	for _, in := range s.store.List() {
		f.Chunks++
		f.Used += in.Length
		f.MetadataBytes += status.MetaFileBytes(in.Length)
		if in.Corrupt {
			f.Corrupt = append(f.Corrupt, in.Handle)
		}
	}
	disks, _ := s.store.Disks()
	for _, d := range disks {
		f.Disks = append(f.Disks, DiskFigures{ID: d.ID, Total: d.Total, Free: d.Free})
	}
	return f
}

// readTotals counts the data stream's reads; none before it serves.
func (s *Server) readTotals() rpc.ReadTotals {
	s.mu.Lock()
	stream := s.stream
	s.mu.Unlock()
	if stream == nil {
		return rpc.ReadTotals{}
	}
	return stream.ReadTotals()
}

// running returns the clones in flight.
func (l *cloneLimiter) running() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.active)
}
