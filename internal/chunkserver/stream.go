package chunkserver

import (
	"fmt"
	"os"

	"github.com/chunkfs/chunkfs"
)

// streamHandler serves the data stream: pushes go to the buffer, reads to
// the store after a version check.
type streamHandler struct{ s *Server }

func (h streamHandler) BeginPush(id chunkfs.DataID, n int64) ([]byte, func([]uint32, bool), error) {
	return h.s.buf.reserve(id, n)
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
	if chunkfs.KindOf(err) == chunkfs.KindChecksum {
		h.s.reporter.corrupt(hd)
	}
	return n, sums, err
}

// ChunkFile opens chunk h's data file, when the store has one, so that the
// stream server sends verified ranges of it with sendfile.
func (h streamHandler) ChunkFile(hd chunkfs.Handle) (*os.File, error) {
	return h.s.store.DataFile(hd)
}
