package rpc

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// ChunkOpener is implemented by a StreamHandler that can open a chunk once
// for a whole read request, instead of finding and opening it again for
// every piece: the server then reads and verifies the pieces with the
// returned OpenChunk, and, when it has a File, sends them from it with
// sendfile, which hands the page-cache pages to the socket instead of
// copying the verified buffer into it: one copy of every byte fewer. The
// frames carry the checksums of the verified bytes, so should the file
// change between the check and the send (a concurrent overwrite of the
// range), the receiver sees a frame fail its checksum in transit and reads
// again.
type ChunkOpener interface {
	// OpenChunk opens chunk h, whose replica version must be at least v,
	// for reading.
	OpenChunk(h chunkfs.Handle, v chunkfs.Version) (OpenChunk, error)
}

// OpenChunk is a chunk opened for one read request, used by one goroutine
// at a time.
type OpenChunk interface {
	// ReadChunk is StreamHandler.ReadChunk of the opened chunk.
	ReadChunk(off int64, p []byte, sums []uint32) (int, []uint32, error)
	// File returns the chunk's data file, whose offsets are chunk offsets,
	// or nil when it has none. It stays open until Close.
	File() *os.File
	Close() error
}

// handlerChunk reads a chunk of a handler that is no ChunkOpener through
// StreamHandler.ReadChunk, piece by piece; it has no file.
type handlerChunk struct {
	h  StreamHandler
	hd chunkfs.Handle
	v  chunkfs.Version
}

func (c *handlerChunk) ReadChunk(off int64, p []byte, sums []uint32) (int, []uint32, error) {
	return c.h.ReadChunk(c.hd, c.v, off, p, sums)
}

func (c *handlerChunk) File() *os.File { return nil }

func (c *handlerChunk) Close() error { return nil }

// openChunk opens the chunk a read request names. Its File is nil when the
// data is to be sent from memory: the handler keeps no files, the
// connection is not TCP, or sendfile is off.
func (c *streamConn) openChunk(req *readRequest) (OpenChunk, *os.File, error) {
	if o, ok := c.s.h.(ChunkOpener); ok {
		oc, err := o.OpenChunk(req.handle, req.version)
		if err != nil {
			return nil, nil, err
		}
		var file *os.File
		if c.canSendfile() {
			file = oc.File()
		}
		return oc, file, nil
	}
	return &handlerChunk{h: c.s.h, hd: req.handle, v: req.version}, nil, nil
}

// serveRead answers a read request with verified data frames. Each frame
// that is a whole checksum block carries the block's stored checksum, so
// data is checked end to end without being summed again on the server. A
// goroutine reads and verifies the next piece from disk while the current
// one is being sent; a request of one piece is answered without it.
func (c *streamConn) serveRead(req *readRequest) error {
	defer c.s.pacer.begin(c.conn, req.class)()
	oc, file, err := c.openChunk(req)
	if err != nil {
		return c.reply(frameError, encodeError(err))
	}
	defer oc.Close()
	first := piecePool.Get().(*readPiece)
	defer piecePool.Put(first)
	if end := req.off + int64(req.length); end <= pieceEnd(req.off) {
		first.readAt(oc, first.buf, req.off, end)
		if err := c.sendPiece(first, file); err != errMore {
			return err
		}
		return c.reply(frameOK, []byte{0})
	}
	// From memory, a piece is sent from its buffer, so two buffers take
	// turns. From a file, only the verified range and its frame sums are
	// sent on, so the reader reads every piece into one buffer and may run
	// up to sendfileAhead pieces ahead of the sender.
	var scratch []byte
	pieces := []*readPiece{first}
	if file == nil {
		second := piecePool.Get().(*readPiece)
		defer piecePool.Put(second)
		pieces = append(pieces, second)
	} else {
		scratch = first.buf
		for range sendfileAhead - 1 {
			pieces = append(pieces, &readPiece{})
		}
	}
	free := make(chan *readPiece, len(pieces))
	for _, p := range pieces {
		free <- p
	}
	filled := make(chan *readPiece, len(pieces))
	stop := make(chan struct{})
	go c.readPieces(req, oc, scratch, free, filled, stop)
	defer func() {
		close(stop)
		for range filled { // wait for the reader to let go of the pieces
		}
	}()
	for p := range filled {
		if err := c.sendPiece(p, file); err != errMore {
			return err
		}
		free <- p
	}
	return c.reply(frameOK, []byte{0})
}

// sendfileAhead is how many verified pieces may wait to be sent with
// sendfile: the reader keeps verifying while the sender waits for the
// socket, and the sender finds pieces ready when it can send again.
const sendfileAhead = 4

// errMore is sendPiece's answer when the request goes on after the piece.
var errMore = errors.New("more pieces")

// sendPiece sends piece p of a read's answer, and the answer's end when p
// ends it (the chunk ended or a read failed); else it returns errMore, or
// whatever failed. A piece that fills the request does not end the answer:
// the caller sends ok. With a file, p's buffer is not used.
func (c *streamConn) sendPiece(p *readPiece, file *os.File) error {
	if p.err != nil && !errors.Is(p.err, io.EOF) {
		return c.reply(frameError, encodeError(p.err))
	}
	var data []byte
	if file == nil {
		data = p.buf[:p.n]
	}
	if err := c.sendFrames(data, p.n, p.sums, file, p.off); err != nil {
		return err
	}
	if errors.Is(p.err, io.EOF) {
		return c.reply(frameOK, []byte{1})
	}
	return errMore
}

// canSendfile reports whether reads may be sent with sendfile on this
// connection: it is TCP and sendfile is not turned off.
func (c *streamConn) canSendfile() bool {
	if c.s.cfg.NoSendfile {
		return false
	}
	if c.raw == nil {
		c.raw = rawTCP(c.conn)
	}
	return c.raw != nil
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
// sent, large enough to take few system calls and hand-offs between the
// reading and the sending goroutine (256 KiB pieces took a third more
// context switches than 512 KiB ones and ~5 % more CPU).
const pieceSize = 512 << 10

// piecePool recycles the piece buffers of all connections: a connection
// holds one or two only while it answers a read.
var piecePool = sync.Pool{New: func() any { return &readPiece{buf: make([]byte, pieceSize)} }}

// pieceEnd is the end of the piece that starts at chunk offset off: the
// next multiple of pieceSize, so every piece after a read's first starts
// on a piece boundary, which is a block one.
func pieceEnd(off int64) int64 { return (off/pieceSize + 1) * pieceSize }

// readAt reads the verified chunk data of oc from off up to end (at most
// one piece) into buf, and sets p to describe it, with the checksum of
// every frame it will be sent in (frameSums).
func (p *readPiece) readAt(oc OpenChunk, buf []byte, off, end int64) {
	p.off = off
	p.n, p.sums, p.err = oc.ReadChunk(off, buf[:end-off], p.sums[:0])
	if p.err == nil || errors.Is(p.err, io.EOF) {
		p.sums = frameSums(buf[:p.n], off, p.sums)
	}
}

// frameSums returns the checksums of the data frames that p, chunk data at
// off, is sent in (see sendFrames): sums, the block sums ReadChunk gave,
// for the frames that are whole blocks of an aligned piece, and computed
// for the others.
func frameSums(p []byte, off int64, sums []uint32) []uint32 {
	if off%chunkfs.BlockSize != 0 {
		sums = sums[:0]
	}
	i := 0
	for pos := off; len(p) > 0; i++ {
		n := min(len(p), frameLen(pos))
		if i >= len(sums) {
			sums = append(sums, checksum.Sum(p[:n]))
		}
		p = p[n:]
		pos += int64(n)
	}
	return sums[:i]
}

// readPieces fills pieces in order until the request is done, a read fails,
// or stop is closed; it closes filled when it returns.
// A piece is read into scratch when it is not nil, else into its own
// buffer.
func (c *streamConn) readPieces(req *readRequest, oc OpenChunk, scratch []byte, free <-chan *readPiece, filled chan<- *readPiece, stop <-chan struct{}) {
	defer close(filled)
	pos, end := req.off, req.off+int64(req.length)
	for pos < end {
		var p *readPiece
		select {
		case p = <-free:
		case <-stop:
			return
		}
		buf := p.buf
		if scratch != nil {
			buf = scratch
		}
		p.readAt(oc, buf, pos, min(end, pieceEnd(pos)))
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

// sendFrames sends the n bytes of verified chunk data at off as data
// frames that end on checksum-block boundaries of the chunk (so a reader
// can tell where each frame of an answer ends: see receiveRead), whose
// checksums are sums (frameSums): from file with sendfile when file is
// not nil, else from p, the data, in one system call.
func (c *streamConn) sendFrames(p []byte, n int, sums []uint32, file *os.File, off int64) error {
	if cap(c.hdrs) < len(sums)*frameHeaderSize {
		c.hdrs = make([]byte, len(sums)*frameHeaderSize)
	}
	hdrs := c.hdrs[:0]
	bufs := c.bufs[:0]
	lens := c.lens[:0]
	for i, pos := 0, off; n > 0; i++ {
		l := min(n, frameLen(pos))
		hdrs = hdrs[:len(hdrs)+frameHeaderSize]
		h := hdrs[len(hdrs)-frameHeaderSize:]
		putHeader(h, frameData, l, sums[i])
		lens = append(lens, l)
		if file == nil {
			bufs = append(bufs, h, p[:l])
			p = p[l:]
		}
		n -= l
		pos += int64(l)
	}
	c.bufs, c.lens = bufs[:0], lens[:0]
	c.conn.SetWriteDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	if file != nil {
		return sendFileFrames(c.raw, file, off, hdrs, lens)
	}
	_, err := bufs.WriteTo(c.conn) // consumes bufs, dropping its references to p
	return err
}

// frameLen is the largest data frame of a read answer that starts at chunk
// offset off: up to the next checksum-block boundary.
func frameLen(off int64) int {
	return int(chunkfs.BlockSize - off%chunkfs.BlockSize)
}
