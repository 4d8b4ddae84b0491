package rpc

import (
	"errors"
	"io"
	"os"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// ChunkFiler is implemented by a StreamHandler whose chunks are files of
// the operating system. The server then still reads and verifies each
// piece of a read with ReadChunk, but sends the piece from the file with
// sendfile, which hands the page-cache pages to the socket, instead of
// copying the verified buffer into it: one copy of every byte fewer. The
// frames carry the checksums of the verified bytes, so should the file
// change between the check and the send (a concurrent overwrite of the
// range), the receiver sees a frame fail its checksum in transit and reads
// again.
type ChunkFiler interface {
	// ChunkFile opens chunk h's data file for reading, or returns nil when
	// the chunk has none. Chunk offsets are file offsets.
	ChunkFile(h chunkfs.Handle) (*os.File, error)
}

// serveRead answers a read request with verified data frames. Each frame
// that is a whole checksum block carries the block's stored checksum, so
// data is checked end to end without being summed again on the server. A
// goroutine reads and verifies the next piece from disk while the current
// one is being sent.
func (c *streamConn) serveRead(req *readRequest) error {
	if c.pieces[0] == nil {
		c.pieces = [2]*readPiece{{buf: make([]byte, pieceSize)}, {buf: make([]byte, pieceSize)}}
	}
	file := c.chunkFile(req.handle)
	if file != nil {
		defer file.Close()
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
		if err := c.sendFrames(p.buf[:p.n], p.sums, file, p.off); err != nil {
			return err
		}
		if errors.Is(p.err, io.EOF) {
			return c.reply(frameOK, []byte{1})
		}
		free <- p
	}
	return c.reply(frameOK, []byte{0})
}

// chunkFile opens the data file to send chunk h's bytes from, or returns
// nil when they are to be sent from memory: the handler keeps no files,
// the connection is not TCP, or the file does not open (ReadChunk then
// reports whatever is wrong).
func (c *streamConn) chunkFile(h chunkfs.Handle) *os.File {
	fh, ok := c.s.h.(ChunkFiler)
	if !ok || c.s.cfg.NoSendfile {
		return nil
	}
	if c.raw == nil {
		if c.raw = rawTCP(c.conn); c.raw == nil {
			return nil
		}
	}
	f, err := fh.ChunkFile(h)
	if err != nil {
		return nil
	}
	return f
}

// readPiece is one piece of a read, filled from disk.
type readPiece struct {
	buf  []byte
	off  int64 // chunk offset of buf[0]
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
		p.off = pos
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

// sendFrames sends p, the verified chunk data at off, as data frames,
// using sums[i] as the checksum of frame i where there is one: from file
// with sendfile when file is not nil, else from p in one system call.
func (c *streamConn) sendFrames(p []byte, sums []uint32, file *os.File, off int64) error {
	nf := int(checksum.NumBlocks(int64(len(p))))
	if cap(c.hdrs) < nf*frameHeaderSize {
		c.hdrs = make([]byte, nf*frameHeaderSize)
	}
	hdrs := c.hdrs[:nf*frameHeaderSize]
	bufs := c.bufs[:0]
	lens := c.lens[:0]
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
		lens = append(lens, n)
		p = p[n:]
	}
	c.bufs, c.lens = bufs[:0], lens[:0]
	c.conn.SetWriteDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	if file != nil {
		clear(bufs)
		return sendFileFrames(c.raw, file, off, hdrs, lens)
	}
	_, err := bufs.WriteTo(c.conn) // consumes bufs, dropping its references to p
	return err
}
