package rpc

import (
	"context"
	"io"
	"net"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// servePush receives a push, forwarding it down the chain as it arrives:
// each frame's header at once, then its payload in pieces of forwardPiece
// bytes, the frame's checksum being verified on the side. A failure of this
// replica or of one further down, and a frame that failed its checksum, are
// reported once the whole data has been received, so the connection stays
// in step; a broken stream (bad header, I/O error) closes the connection.
// Until it answers, it sends wait frames upstream (sendWaits). A push
// refused (refused not nil) is received, dropped and answered with that
// error; it goes no further down the chain.
func (c *streamConn) servePush(req *pushRequest, refused error) error {
	var buf []byte
	var done func([]uint32, bool)
	err := refused
	if err == nil {
		buf, done, err = c.s.h.BeginPush(req.id, req.length)
	}
	var next *dataConn
	if err != nil {
		buf, done = nil, func([]uint32, bool) {}
	} else {
		next, err = c.openNext(req)
	}
	stopWaits := c.sendWaits()
	sums, bad, rerr := c.receive(req.length, buf, next)
	if rerr != nil {
		stopWaits()
		done(nil, false)
		if next != nil {
			next.close()
		}
		return rerr
	}
	if err == nil {
		err = bad
	}
	if next != nil {
		// Read the next hop's answer even after a bad frame (which it got
		// too and reports as well), so its connection stays in step.
		ferr := next.finishPush(req.chain[0])
		if err == nil {
			err = ferr
		}
	}
	// Before the answer, also at the chain's last replica: a wait frame
	// after it would reach whoever uses the connection next.
	stopWaits()
	// The data is kept (or dropped) before the answer goes back, so an
	// acknowledged push is visible to a write that follows.
	done(sums, err == nil)
	if err != nil {
		return c.reply(frameError, encodeError(err))
	}
	return c.reply(frameOK, nil)
}

// sendWaits sends a wait frame upstream every third of the frame timeout
// until the returned function is called, which returns once the last one
// is written: the push's answer goes after them. A failed write stops the
// frames; the push itself then fails on its own. A timer, not a goroutine:
// most pushes end before the first frame is due, and cost one timer.
func (c *streamConn) sendWaits() (stop func()) {
	every := c.s.cfg.FrameTimeout / 3
	var mu sync.Mutex // serialises the frames with stop
	stopped := false
	var t *time.Timer
	mu.Lock() // the first frame waits for t to be set
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		c.conn.SetWriteDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
		if _, err := c.conn.Write(appendFrame(nil, frameWait, nil)); err == nil {
			t.Reset(every)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// openNext opens the push to the next replica of the chain, if any.
func (c *streamConn) openNext(req *pushRequest) (*dataConn, error) {
	if len(req.chain) == 0 {
		return nil, nil
	}
	fwd := &pushRequest{id: req.id, length: req.length, chain: req.chain[1:], token: req.token, reqID: req.reqID}
	dc, err := c.s.cfg.Client.startPush(context.Background(), req.chain[0], fwd)
	if err != nil {
		return nil, err
	}
	// Instead of one deadline for the whole push (the context has none),
	// each piece forwarded and each answer frame must come within this
	// server's frame timeout.
	dc.frameTimeout = c.s.cfg.FrameTimeout
	return dc, nil
}

// forwardPiece is the least of a frame a replica receives before
// forwarding it (unless the frame ends first): less than a frame, so on a
// slow link each hop of a chain adds the time of a piece, not of a whole
// frame. More is forwarded at once when more has arrived, so on a fast
// link (loopback) a frame goes on in one or two writes, not four.
const forwardPiece = 16 << 10

// receive reads length bytes of data frames into buf (nil: discard) and
// forwards them to next (nil: none) piece by piece as they arrive. A
// forwarding failure stops forwarding but not receiving; next is then
// closed. It returns the frames' checksums if every frame but the last was
// a whole block, else nil; bad is a KindChecksum error when a frame's
// payload did not match its checksum (the rest is still received); err is
// a broken stream.
func (c *streamConn) receive(length int64, buf []byte, next *dataConn) (sums []uint32, bad, err error) {
	var scratch []byte
	sums = make([]uint32, 0, checksum.NumBlocks(length))
	for pos := int64(0); pos < length; {
		c.conn.SetReadDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
		h, err := readHeader(c.r, c.hdr[:])
		if err != nil {
			return nil, nil, err
		}
		if h.typ != frameData || h.length == 0 || int64(h.length) > length-pos {
			return nil, nil, protocolError("unexpected %v frame of %d bytes in a push", h.typ, h.length)
		}
		if sums != nil && (h.length == chunkfs.BlockSize || pos+int64(h.length) == length) {
			sums = append(sums, h.sum)
		} else {
			sums = nil
		}
		var p []byte
		if buf != nil {
			p = buf[pos : pos+int64(h.length)]
		} else {
			if scratch == nil {
				scratch = make([]byte, chunkfs.MaxFrameSize)
			}
			p = scratch[:h.length]
		}
		sum, err := c.receiveFrame(h, p, next)
		if err != nil {
			return nil, nil, err
		}
		if sum != h.sum && bad == nil {
			bad = chunkfs.E("push", "", chunkfs.KindChecksum, "a data frame failed its checksum")
		}
		pos += int64(h.length)
	}
	if bad != nil {
		sums = nil
	}
	return sums, bad, nil
}

// receiveFrame reads the payload of the data frame h into p, forwarding
// it to next (the first piece with h's header) in pieces of at least
// forwardPiece bytes as they arrive, and returns the payload's checksum.
// Without a next hop the frame is read whole.
func (c *streamConn) receiveFrame(h frameHeader, p []byte, next *dataConn) (uint32, error) {
	if next == nil || next.err != nil {
		if _, err := io.ReadFull(c.r, p); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		return checksum.Sum(p), nil
	}
	var sum uint32
	for got := 0; got < len(p); {
		n, err := io.ReadAtLeast(c.r, p[got:], min(forwardPiece, len(p)-got))
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		piece := p[got : got+n]
		if next.err == nil {
			first := &h
			if got > 0 {
				first = nil
			}
			next.forwardPiece(first, piece)
		}
		sum = checksum.Update(sum, piece)
		got += n
	}
	return sum, nil
}

// startPush dials addr (or reuses a pooled connection) and sends the push
// header; the caller then sends the data frames and reads the answer.
func (c *DataClient) startPush(ctx context.Context, addr string, req *pushRequest) (*dataConn, error) {
	payload, err := req.encode()
	if err != nil {
		return nil, err
	}
	dc, err := c.get(ctx, addr, true)
	if err != nil {
		return nil, err
	}
	if dc.frameTimeout > 0 {
		dc.conn.SetWriteDeadline(time.Now().Add(dc.frameTimeout))
	}
	if _, err := dc.conn.Write(appendFrame(nil, framePush, payload)); err != nil {
		dc.close()
		return nil, unavailable("push", addr, err)
	}
	return dc, nil
}

// forwardPiece sends p, part of a data frame, preceded by the frame's
// header h when p is its first piece; a failure is kept in dc.err.
func (dc *dataConn) forwardPiece(h *frameHeader, p []byte) {
	if dc.frameTimeout > 0 {
		dc.conn.SetWriteDeadline(time.Now().Add(dc.frameTimeout))
	}
	var err error
	if h != nil {
		putHeader(dc.hdr[:], frameData, h.length, h.sum)
		bufs := net.Buffers{dc.hdr[:], p}
		_, err = bufs.WriteTo(dc.conn)
	} else {
		_, err = dc.conn.Write(p)
	}
	if err != nil {
		dc.err = unavailable("push", dc.addr, err)
	}
}

// sendData sends p as data frames, several per system call.
func (dc *dataConn) sendData(p []byte) error {
	const batch = 16
	var hdrs [batch * frameHeaderSize]byte
	for len(p) > 0 {
		if dc.frameTimeout > 0 {
			dc.conn.SetWriteDeadline(time.Now().Add(dc.frameTimeout))
		}
		bufs := make(net.Buffers, 0, 2*batch)
		for i := 0; i < batch && len(p) > 0; i++ {
			n := min(len(p), chunkfs.MaxFrameSize)
			h := hdrs[i*frameHeaderSize : (i+1)*frameHeaderSize]
			putHeader(h, frameData, n, checksum.Sum(p[:n]))
			bufs = append(bufs, h, p[:n])
			p = p[n:]
		}
		if _, err := bufs.WriteTo(dc.conn); err != nil {
			return unavailable("push", dc.addr, err)
		}
	}
	return nil
}

// finishPush reads the answer to a push, skipping wait frames (each one
// renews the frame timeout), and returns the connection to the pool, or
// closes it after a failure.
func (dc *dataConn) finishPush(path string) error {
	if dc.err != nil {
		dc.close()
		return dc.err
	}
	var h frameHeader
	var payload []byte
	for {
		if dc.frameTimeout > 0 {
			dc.conn.SetReadDeadline(time.Now().Add(dc.frameTimeout))
		}
		var err error
		h, payload, err = dc.readFrame()
		if err == nil && h.typ == frameWait && h.length != 0 {
			err = protocolError("wait frame of %d bytes", h.length)
		}
		if err != nil {
			dc.close()
			return streamFailure("push", dc.addr, err)
		}
		if h.typ != frameWait {
			break
		}
	}
	switch h.typ {
	case frameOK:
		dc.release()
		return nil
	case frameError:
		dc.release()
		return decodeError("push", path, payload)
	}
	dc.close()
	return streamFailure("push", dc.addr, protocolError("unexpected %v frame answering a push", h.typ))
}
