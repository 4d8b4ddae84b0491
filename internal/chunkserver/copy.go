package chunkserver

import (
	"github.com/chunkfs/chunkfs"
)

// copyChunk makes a local copy of replica h at version v under the new
// handle nh, at the same version: the master's copy-on-write of a chunk a
// snapshot shares, before it grants a lease on the copy. The source's
// mutations are held off while it is read (its order lock), and the copy
// is durable before the answer; on failure nothing of it is kept. It
// returns the copy's length.
func (s *Server) copyChunk(h chunkfs.Handle, v chunkfs.Version, nh chunkfs.Handle) (int64, error) {
	switch {
	case h == 0 || nh == 0 || h == nh:
		return 0, invalid("copy chunk", h, "needs a chunk and a different new handle")
	case v == 0:
		return 0, invalid("copy chunk", h, "zero version")
	}
	st := s.state(h)
	st.order.Lock()
	defer st.order.Unlock()
	in, err := s.store.Copy(h, v, nh)
	if err != nil {
		s.log.Warn("copy failed", "chunk", chunkName(h), "version", v, "copy", chunkName(nh), "err", err)
		return 0, err
	}
	s.log.Info("copied", "chunk", chunkName(h), "version", v, "copy", chunkName(nh), "bytes", in.Length)
	return in.Length, nil
}
