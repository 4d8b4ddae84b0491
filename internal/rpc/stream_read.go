package rpc

import (
	"errors"
	"io"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// serveRead answers a read request with verified data frames. Each frame
// that is a whole checksum block carries the block's stored checksum, so
// data is checked end to end without being summed again on the server. A
// goroutine reads and verifies the next piece from disk while the current
// one is being sent.
func (c *streamConn) serveRead(req *readRequest) error {
	if c.pieces[0] == nil {
		c.pieces = [2]*readPiece{{buf: make([]byte, pieceSize)}, {buf: make([]byte, pieceSize)}}
	}
	free := make(chan *readPiece, 2)
	free <- c.pieces[0]
	free <- c.pieces[1]
	filled := make(chan *readPiece)
	stop := make(chan struct{})
	go c.readPieces(req, free, filled, stop)
	defer func() {
		close(stop)
		for range filled { // wait for the reader to let go of the pieces
		}
	}()
	for p := range filled {
		if p.err != nil && !errors.Is(p.err, io.EOF) {
			return c.reply(frameError, encodeError(p.err))
		}
		if err := c.sendFrames(p.buf[:p.n], p.sums); err != nil {
			return err
		}
		if errors.Is(p.err, io.EOF) {
			return c.reply(frameOK, []byte{1})
		}
		free <- p
	}
	return c.reply(frameOK, []byte{0})
}

// readPiece is one piece of a read, filled from disk.
type readPiece struct {
	buf  []byte
	n    int
	sums []uint32
	err  error
}

// pieceSize is how much chunk data the server reads from disk at a time:
// small enough that the data is still in cache when it is verified and
// sent, large enough to take few system calls.
const pieceSize = 256 << 10

// readPieces fills pieces in order until the request is done, a read fails,
// or stop is closed; it closes filled when it returns.
func (c *streamConn) readPieces(req *readRequest, free <-chan *readPiece, filled chan<- *readPiece, stop <-chan struct{}) {
	defer close(filled)
	pos, end := req.off, req.off+int64(req.length)
	for pos < end {
		var p *readPiece
		select {
		case p = <-free:
		case <-stop:
			return
		}
		// Pieces after the first start on a piece boundary, so on a block one.
		n := min(end, (pos/pieceSize+1)*pieceSize) - pos
		p.n, p.sums, p.err = c.s.h.ReadChunk(req.handle, req.version, pos, p.buf[:n], p.sums[:0])
		select {
		case filled <- p:
		case <-stop:
			return
		}
		if p.err != nil {
			return
		}
		pos += int64(p.n)
	}
}

// sendFrames writes p as data frames in one system call, using sums[i] as
// the checksum of frame i where there is one.
func (c *streamConn) sendFrames(p []byte, sums []uint32) error {
	nf := int(checksum.NumBlocks(int64(len(p))))
	if cap(c.hdrs) < nf*frameHeaderSize {
		c.hdrs = make([]byte, nf*frameHeaderSize)
	}
	hdrs := c.hdrs[:nf*frameHeaderSize]
	bufs := c.bufs[:0]
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
	c.bufs = bufs[:0]
	c.conn.SetWriteDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	_, err := bufs.WriteTo(c.conn) // consumes bufs, dropping its references to p
	return err
}
