package rpc

import (
	"context"
	"net"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// servePush receives a push, forwarding each frame down the chain as soon
// as it has arrived and passed its checksum. A failure of this replica or
// of one further down is reported once the whole data has been received,
// so the connection stays in step; a broken frame closes the connection.
func (c *streamConn) servePush(req *pushRequest) error {
	buf, done, err := c.s.h.BeginPush(req.id, req.length)
	var next *dataConn
	if err != nil {
		buf, done = nil, func([]uint32, bool) {}
	} else {
		next, err = c.openNext(req)
	}
	sums, rerr := c.receive(req.length, buf, next)
	if rerr != nil {
		done(nil, false)
		if next != nil {
			next.close()
		}
		return rerr
	}
	if err == nil && next != nil {
		err = next.finishPush(req.chain[0])
	}
	// The data is kept (or dropped) before the answer goes back, so an
	// acknowledged push is visible to a write that follows.
	done(sums, err == nil)
	if err != nil {
		return c.reply(frameError, encodeError(err))
	}
	return c.reply(frameOK, nil)
}

// openNext opens the push to the next replica of the chain, if any.
func (c *streamConn) openNext(req *pushRequest) (*dataConn, error) {
	if len(req.chain) == 0 {
		return nil, nil
	}
	fwd := &pushRequest{id: req.id, length: req.length, chain: req.chain[1:]}
	dc, err := c.s.cfg.Client.startPush(context.Background(), req.chain[0], fwd)
	if err != nil {
		return nil, err
	}
	// Instead of one deadline for the whole push, each frame forwarded and
	// the final answer must come within the frame timeout.
	dc.conn.SetDeadline(time.Time{})
	dc.frameTimeout = c.s.cfg.FrameTimeout
	return dc, nil
}

// receive reads length bytes of data frames into buf (nil: discard) and
// forwards each to next (nil: none). A forwarding failure stops forwarding
// but not receiving; next is then closed. It returns the frames' checksums
// if every frame but the last was a whole block, else nil.
func (c *streamConn) receive(length int64, buf []byte, next *dataConn) ([]uint32, error) {
	var scratch []byte
	sums := make([]uint32, 0, checksum.NumBlocks(length))
	for pos := int64(0); pos < length; {
		c.conn.SetReadDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
		h, err := readHeader(c.r, c.hdr[:])
		if err != nil {
			return nil, err
		}
		if h.typ != frameData || h.length == 0 || int64(h.length) > length-pos {
			return nil, protocolError("unexpected %v frame of %d bytes in a push", h.typ, h.length)
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
		if err := readPayload(c.r, h, p); err != nil {
			return nil, err
		}
		if next != nil && next.err == nil {
			next.forward(h.sum, p)
		}
		pos += int64(h.length)
	}
	return sums, nil
}

// startPush dials addr (or reuses a pooled connection) and sends the push
// header; the caller then sends the data frames and reads the answer.
func (c *DataClient) startPush(ctx context.Context, addr string, req *pushRequest) (*dataConn, error) {
	payload, err := req.encode()
	if err != nil {
		return nil, err
	}
	dc, err := c.get(ctx, addr)
	if err != nil {
		return nil, err
	}
	if _, err := dc.conn.Write(appendFrame(nil, framePush, payload)); err != nil {
		dc.close()
		return nil, unavailable("push", addr, err)
	}
	return dc, nil
}

// forward sends one data frame; a failure is kept in dc.err.
func (dc *dataConn) forward(sum uint32, p []byte) {
	putHeader(dc.hdr[:], frameData, len(p), sum)
	if dc.frameTimeout > 0 {
		dc.conn.SetWriteDeadline(time.Now().Add(dc.frameTimeout))
	}
	bufs := net.Buffers{dc.hdr[:], p}
	if _, err := bufs.WriteTo(dc.conn); err != nil {
		dc.err = unavailable("push", dc.addr, err)
	}
}

// sendData sends p as data frames, several per system call.
func (dc *dataConn) sendData(p []byte) error {
	const batch = 16
	var hdrs [batch * frameHeaderSize]byte
	for len(p) > 0 {
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

// finishPush reads the answer to a push and returns the connection to the
// pool, or closes it after a failure.
func (dc *dataConn) finishPush(path string) error {
	if dc.err != nil {
		dc.close()
		return dc.err
	}
	if dc.frameTimeout > 0 {
		dc.conn.SetReadDeadline(time.Now().Add(dc.frameTimeout))
	}
	h, payload, err := dc.readFrame()
	if err != nil {
		dc.close()
		return streamFailure("push", dc.addr, err)
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
