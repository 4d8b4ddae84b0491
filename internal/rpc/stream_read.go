package rpc

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// readPiece is how much chunk data the server reads from disk at a time.
const readPiece = 1 << 20

// serveRead answers a read request with verified data frames. Each frame
// that is a whole checksum block carries the block's stored checksum, so
// data is checked end to end without being summed again on the server.
func (c *streamConn) serveRead(req *readRequest) error {
	if c.buf == nil {
		c.buf = make([]byte, readPiece)
	}
	pos, end := req.off, req.off+int64(req.length)
	for pos < end {
		// Pieces after the first start on a piece boundary, so on a block one.
		n := min(end, (pos/readPiece+1)*readPiece) - pos
		got, sums, err := c.s.h.ReadChunk(req.handle, req.version, pos, c.buf[:n], c.sums[:0])
		c.sums = sums
		if err != nil && !errors.Is(err, io.EOF) {
			return c.reply(frameError, encodeError(err))
		}
		if werr := c.sendFrames(c.buf[:got], sums); werr != nil {
			return werr
		}
		pos += int64(got)
		if errors.Is(err, io.EOF) {
			return c.reply(frameOK, []byte{1})
		}
	}
	return c.reply(frameOK, []byte{0})
}

// sendFrames writes p as data frames in one system call, using sums[i] as
// the checksum of frame i where there is one.
func (c *streamConn) sendFrames(p []byte, sums []uint32) error {
	nf := int(checksum.NumBlocks(int64(len(p))))
	hdrs := make([]byte, nf*frameHeaderSize)
	bufs := make(net.Buffers, 0, 2*nf)
	for i := 0; len(p) > 0; i++ {
		n := min(len(p), chunkfs.MaxFrameSize)
		var sum uint32
		if i < len(sums) {
			sum = sums[i]
		} else {
			sum = checksum.Sum(p[:n])
		}
		h := hdrs[i*frameHeaderSize : (i+1)*frameHeaderSize]
		putHeader(h, frameData, n, sum)
		bufs = append(bufs, h, p[:n])
		p = p[n:]
	}
	c.conn.SetWriteDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	_, err := bufs.WriteTo(c.conn)
	return err
}
