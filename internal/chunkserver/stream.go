package chunkserver

import (
	"fmt"
	"os"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/chunkstore"
	"github.com/chunkfs/chunkfs/internal/rpc"
)

// streamHandler serves the data stream: pushes go to the buffer, reads to
// the store after a version check.
type streamHandler struct{ s *Server }

func (h streamHandler) BeginPush(id chunkfs.DataID, n int64) ([]byte, func([]uint32, bool), error) {
	buf, done, err := h.s.buf.reserve(id, n)
	if err != nil {
		return nil, nil, err
	}
	return buf, h.s.traffic.counted(n, done), nil
}

func (h streamHandler) ReadChunk(hd chunkfs.Handle, v chunkfs.Version, off int64, p []byte, sums []uint32) (int, []uint32, error) {
	defer h.s.begin()()
	in, err := h.s.store.Info(hd)
	if err != nil {
		return 0, sums, err
	}
	if in.Version < v {
		return 0, sums, chunkfs.E("read", chunkName(hd), chunkfs.KindStale, fmt.Sprintf("replica at version %d, reader wants %d", in.Version, v))
	}
	n, sums, err := h.s.store.ReadWithSums(hd, off, p, sums)
	h.s.traffic.read.Add(int64(n))
	if chunkfs.KindOf(err) == chunkfs.KindChecksum {
		h.s.reporter.corrupt(hd)
	}
	return n, sums, err
}

// OpenChunk opens chunk hd for one read request of the data stream: the
// data file is opened once, not once per piece. The request counts in the
// server's load until the chunk is closed.
func (h streamHandler) OpenChunk(hd chunkfs.Handle, v chunkfs.Version) (rpc.OpenChunk, error) {
	end := h.s.begin()
	r, err := h.s.store.OpenReader(hd)
	if err != nil {
		end()
		if chunkfs.KindOf(err) == chunkfs.KindChecksum {
			h.s.reporter.corrupt(hd)
		}
		return nil, err
	}
	if in := r.Info(); in.Version < v {
		r.Close()
		end()
		return nil, chunkfs.E("read", chunkName(hd), chunkfs.KindStale, fmt.Sprintf("replica at version %d, reader wants %d", in.Version, v))
	}
	return &openChunk{s: h.s, h: hd, r: r, end: end}, nil
}

// openChunk is a chunk opened for a read request.
type openChunk struct {
	s   *Server
	h   chunkfs.Handle
	r   *chunkstore.Reader
	end func()
}

func (c *openChunk) ReadChunk(off int64, p []byte, sums []uint32) (int, []uint32, error) {
	n, sums, err := c.r.ReadWithSums(off, p, sums)
	c.s.traffic.read.Add(int64(n))
	if chunkfs.KindOf(err) == chunkfs.KindChecksum {
		c.s.reporter.corrupt(c.h)
	}
	return n, sums, err
}

func (c *openChunk) File() *os.File { return c.r.File() }

func (c *openChunk) Close() error {
	c.end()
	return c.r.Close()
}
