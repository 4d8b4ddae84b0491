package rpc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/reqid"
)

// maxIdlePerAddr bounds the idle data connections kept per address.
const maxIdlePerAddr = 8

// DefaultIdleAge is how long a DataClient keeps an idle connection for
// reuse; one idle longer is closed instead. Servers close a connection
// idle for DefaultStreamIdle, twice as long, so a client does not reuse a
// connection its server is closing; a read that still meets one (a
// server with a shorter IdleTimeout) is sent again on a new connection.
const DefaultIdleAge = 15 * time.Second

// DataClient is the client side of the data stream: it pushes data along
// chains of chunkservers and reads chunk data. It keeps a pool of
// connections per address and is safe for concurrent use; each request has
// a connection to itself.
type DataClient struct {
	sec     *Security // nil: plain TCP
	dialer  net.Dialer
	idleAge time.Duration    // DefaultIdleAge
	now     func() time.Time // time.Now; tests replace it

	mu     sync.Mutex // guards idle and closed
	idle   map[string][]*dataConn
	closed bool
}

// NewDataClient returns a plain-TCP client with an empty pool.
func NewDataClient() *DataClient { return (*Security)(nil).NewDataClient() }

// NewDataClient returns a client with an empty pool whose connections s
// secures (nil: plain TCP). Under TLS, reads and pushes use ordinary
// writes and reads: the zero-copy paths (sendfile, scatter reads) need
// the bare socket.
func (s *Security) NewDataClient() *DataClient {
	return &DataClient{sec: s, dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second},
		idleAge: DefaultIdleAge, now: time.Now, idle: make(map[string][]*dataConn)}
}

// dataConn is one pooled connection, used by one request at a time.
type dataConn struct {
	c            *DataClient
	addr         string
	conn         net.Conn
	r            *bufio.Reader
	raw          syscall.RawConn // the TCP socket, for scatter reads; nil if none
	sc           *scatter        // scatter-read state, made on first use
	hdr          [frameHeaderSize]byte
	stop         func() bool   // cancels the context watch
	frameTimeout time.Duration // of each write and answer frame of a push; 0: the whole request has one deadline
	err          error         // sticky forwarding error
	idleSince    time.Time     // when it went back to the pool
	reused       bool          // taken from the pool, not dialed for this request
}

func unavailable(op, addr string, err error) error {
	var e *chunkfs.Error
	if errors.As(err, &e) {
		return err
	}
	return &chunkfs.Error{Op: op, Path: addr, Kind: failureKind(err), Err: err}
}

// get returns an idle connection to addr or dials a new one, armed for
// ctx (see arm).
func (c *DataClient) get(ctx context.Context, addr string, perFrame bool) (*dataConn, error) {
	dc, err := c.pooled(addr)
	if err != nil {
		return nil, err
	}
	if dc != nil {
		dc.reused = true
		dc.arm(ctx, perFrame)
		return dc, nil
	}
	return c.dial(ctx, addr, perFrame)
}

// pooled takes the newest idle connection to addr (nil: none), closing
// those idle longer than idleAge.
func (c *DataClient) pooled(addr string) (*dataConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errPoolClosed
	}
	l := c.idle[addr] // oldest first
	now := c.now()
	for len(l) > 0 && now.Sub(l[0].idleSince) > c.idleAge {
		l[0].conn.Close()
		l = l[1:]
	}
	if len(l) == 0 {
		delete(c.idle, addr)
		return nil, nil
	}
	dc := l[len(l)-1]
	c.idle[addr] = l[:len(l)-1]
	return dc, nil
}

// dial opens a new connection to addr, armed for ctx.
func (c *DataClient) dial(ctx context.Context, addr string, perFrame bool) (*dataConn, error) {
	conn, err := c.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, unavailable("dial", addr, err)
	}
	if !c.sec.IsInsecure() {
		if conn, err = c.sec.clientTLS(ctx, conn, addr); err != nil {
			return nil, unavailable("dial", addr, err)
		}
	}
	if err := writeMagic(conn, StreamMagic, 10*time.Second); err != nil {
		conn.Close()
		return nil, unavailable("dial", addr, err)
	}
	dc := &dataConn{c: c, addr: addr, conn: conn, r: bufio.NewReaderSize(conn, readBuffer), raw: rawTCP(conn)}
	dc.arm(ctx, perFrame)
	return dc, nil
}

// arm gives the connection ctx's deadline, then aborts its I/O if ctx ends
// first. In that order, so a cancellation is never overwritten by the
// deadline. Without a deadline in ctx, a request is bounded by
// DefaultTimeout: as a whole, or, when perFrame (pushes, whose data may
// take longer than that to drain through a congested chain), each write
// and each wait for an answer frame.
func (dc *dataConn) arm(ctx context.Context, perFrame bool) {
	d, ok := ctx.Deadline()
	switch {
	case !ok && perFrame:
		d, dc.frameTimeout = time.Time{}, DefaultTimeout
	case !ok:
		d = time.Now().Add(DefaultTimeout)
	}
	dc.conn.SetDeadline(d)
	dc.stop = context.AfterFunc(ctx, func() { dc.conn.SetDeadline(time.Unix(1, 0)) })
}

// release returns a healthy connection to the pool.
func (dc *dataConn) release() {
	if !dc.stop() {
		dc.conn.Close() // the context fired: the deadline is spoiled
		return
	}
	dc.conn.SetDeadline(time.Time{})
	dc.frameTimeout, dc.err, dc.reused = 0, nil, false
	c := dc.c
	dc.idleSince = c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.idle[dc.addr]) >= maxIdlePerAddr {
		dc.conn.Close()
		return
	}
	c.idle[dc.addr] = append(c.idle[dc.addr], dc)
}

// close drops a connection that may be out of step.
func (dc *dataConn) close() {
	dc.stop()
	dc.conn.Close()
}

// readFrame reads one whole answer frame (not data frames of a read).
func (dc *dataConn) readFrame() (frameHeader, []byte, error) {
	h, err := readHeader(dc.r, dc.hdr[:])
	if err != nil {
		return h, nil, err
	}
	payload := make([]byte, h.length)
	return h, payload, readPayload(dc.r, h, payload)
}

// Push sends data to chain[0], which forwards it along chain; it returns
// once every replica in chain holds it under id.
func (c *DataClient) Push(ctx context.Context, chain []string, id chunkfs.DataID, data []byte) error {
	return c.PushToken(ctx, chain, id, data, nil)
}

// PushToken is Push carrying a chunk access token (write access), which
// every replica of the chain checks.
func (c *DataClient) PushToken(ctx context.Context, chain []string, id chunkfs.DataID, data []byte, tok []byte) error {
	if len(chain) == 0 || len(chain) > chunkfs.MaxReplication {
		return chunkfs.E("push", "", chunkfs.KindInvalid, "chain must name 1 to 16 replicas")
	}
	if len(data) > MaxPushSize {
		return chunkfs.E("push", "", chunkfs.KindTooLarge, "push larger than 64 MiB")
	}
	dc, err := c.startPush(ctx, chain[0], &pushRequest{id: id, length: int64(len(data)), chain: chain[1:], token: tok, reqID: reqid.From(ctx)})
	if err != nil {
		return err
	}
	if err := dc.sendData(data); err != nil {
		dc.close()
		return ctxErr(ctx, err)
	}
	return ctxErr(ctx, dc.finishPush(chain[0]))
}

// ctxErr prefers the context's own failure, as KindUnavailable, over the
// I/O error it caused.
func ctxErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && chunkfs.KindOf(err) == chunkfs.KindUnavailable {
		return &chunkfs.Error{Op: "data stream", Kind: chunkfs.KindUnavailable, Err: ctx.Err()}
	}
	return err
}

// Read reads up to len(p) bytes at off from chunk h (replica version must
// be ≥ v) on the chunkserver at addr; it returns n < len(p) and io.EOF
// when the chunk's data ends first.
func (c *DataClient) Read(ctx context.Context, addr string, h chunkfs.Handle, v chunkfs.Version, off int64, p []byte) (int, error) {
	return c.ReadToken(ctx, addr, h, v, off, p, nil)
}

// ReadToken is Read carrying a chunk access token (read access) for h.
func (c *DataClient) ReadToken(ctx context.Context, addr string, h chunkfs.Handle, v chunkfs.Version, off int64, p []byte, tok []byte) (int, error) {
	return c.read(ctx, addr, h, v, off, p, tok, foregroundRead)
}

// ReadBackground is ReadToken for a clone: the server may pace the answer
// while it serves other reads (StreamConfig.BackgroundRate). A server of
// before this request closes the connection on it (KindOther).
func (c *DataClient) ReadBackground(ctx context.Context, addr string, h chunkfs.Handle, v chunkfs.Version, off int64, p []byte, tok []byte) (int, error) {
	return c.read(ctx, addr, h, v, off, p, tok, backgroundRead)
}

// ReadUrgent is ReadToken for the clone of a chunk whose one live replica
// addr holds: the server does not pace the answer and paces its other
// reads while it sends it (StreamConfig.YieldRate). A server of before
// this request closes the connection on it (KindOther).
func (c *DataClient) ReadUrgent(ctx context.Context, addr string, h chunkfs.Handle, v chunkfs.Version, off int64, p []byte, tok []byte) (int, error) {
	return c.read(ctx, addr, h, v, off, p, tok, urgentRead)
}

func (c *DataClient) read(ctx context.Context, addr string, h chunkfs.Handle, v chunkfs.Version, off int64, p []byte, tok []byte, class readClass) (int, error) {
	if off < 0 {
		return 0, chunkfs.E("read", addr, chunkfs.KindInvalid, "negative offset")
	}
	id := reqid.From(ctx)
	if err := checkTail("read", tok, id); err != nil {
		return 0, err
	}
	n := 0
	for n < len(p) {
		m := min(len(p)-n, MaxReadSize)
		got, err := c.readOnce(ctx, addr, &readRequest{handle: h, version: v, off: off + int64(n), length: m, token: tok, reqID: id, class: class}, p[n:n+m])
		n += got
		if err != nil {
			return n, ctxErr(ctx, err)
		}
	}
	return n, nil
}

// readOnce makes one read request of len(p) bytes. A request on a
// pooled connection that fails before any answer arrives (the server
// closed it while it was idle) is sent again on a new one.
func (c *DataClient) readOnce(ctx context.Context, addr string, req *readRequest, p []byte) (int, error) {
	dc, err := c.get(ctx, addr, false)
	if err != nil {
		return 0, err
	}
	reused := dc.reused // dc is another request's once readOn has released it
	n, err := c.readOn(dc, addr, req, p)
	if n == 0 && reused && ctx.Err() == nil && isClosedByPeer(err) {
		if dc, err = c.dial(ctx, addr, false); err != nil {
			return 0, err
		}
		n, err = c.readOn(dc, addr, req, p)
	}
	return n, err
}

// isClosedByPeer reports whether a request failed because the server had
// closed the connection (end of file, reset, broken pipe), as opposed to
// the chunk's end, a timeout, an answer that broke the protocol, or a
// remote error.
func isClosedByPeer(err error) bool {
	if chunkfs.KindOf(err) != chunkfs.KindUnavailable { // not the end of the chunk (a bare io.EOF)
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readOn makes one read request on dc, releasing or closing it.
func (c *DataClient) readOn(dc *dataConn, addr string, req *readRequest, p []byte) (int, error) {
	if _, err := dc.conn.Write(appendFrame(nil, req.frame(), req.encode())); err != nil {
		dc.close()
		return 0, unavailable("read", addr, err)
	}
	n, err := dc.receiveRead(p, req.off)
	var remote *chunkfs.Error
	switch {
	case err == nil:
	case err == errChunkEnd:
		err = io.EOF
	case errors.As(err, &remote):
	default:
		dc.close()
		return n, streamFailure("read", addr, err)
	}
	dc.release()
	return n, err
}

// errChunkEnd marks the end of a read answered short because the chunk ended.
var errChunkEnd = errors.New("end of chunk")

// streamFailure classifies an error that leaves a connection out of step: a
// frame failing its checksum is KindChecksum, a broken protocol KindOther,
// anything else (I/O) KindUnavailable.
func streamFailure(op, addr string, err error) error {
	var perr *errProtocol
	switch {
	case errors.As(err, &perr) && perr.checksum:
		return &chunkfs.Error{Op: op, Path: addr, Kind: chunkfs.KindChecksum, Err: err}
	case errors.As(err, &perr):
		return &chunkfs.Error{Op: op, Path: addr, Kind: chunkfs.KindOther, Err: err}
	}
	return unavailable(op, addr, err)
}

// InTransit reports whether err is a data frame that failed its checksum
// on arrival, as opposed to a replica that found its stored data corrupt
// (an error frame of KindChecksum). A server verifies chunk data before
// sending it, so a frame failing in transit says nothing certain about the
// replica's disk: the range may have been overwritten between the check
// and the send (reads are sent from the file), or the bytes were damaged
// on the way. Either way the reader reads again, but does not report the
// replica corrupt.
func InTransit(err error) bool {
	var perr *errProtocol
	return errors.As(err, &perr) && perr.checksum
}

// receiveRead reads the data frames answering a read of len(p) bytes at
// chunk offset off into p, then its end: with scatter reads as long as the
// answer has the expected layout (receiveScatter), then frame by frame.
func (dc *dataConn) receiveRead(p []byte, off int64) (int, error) {
	n, r := 0, io.Reader(dc.r)
	var h frameHeader
	var rest *bytes.Reader // bytes the scatter reads took past h
	have := false          // h is the next frame's header
	if dc.raw != nil && len(p) > 0 && dc.r.Buffered() == 0 {
		var extra []byte
		var err error
		if n, h, extra, err = dc.receiveScatter(p, off); err != nil {
			return n, err
		}
		have = true
		if len(extra) > 0 {
			rest = bytes.NewReader(extra)
			r = io.MultiReader(rest, dc.r)
		}
	}
	for {
		if !have {
			var err error
			if h, err = readHeader(r, dc.hdr[:]); err != nil {
				return n, err
			}
		}
		have = false
		if h.typ != frameData {
			err := dc.readEnd(r, h, n == len(p))
			if rest != nil && rest.Len() > 0 {
				return n, protocolError("bytes after the end of a read's answer")
			}
			return n, err
		}
		if h.length > len(p)-n {
			return n, protocolError("read answered with more data than asked")
		}
		if err := readPayload(r, h, p[n:n+h.length]); err != nil {
			return n, err
		}
		n += h.length
	}
}

// readEnd decodes the frame that ends a read's answer, whose header is h,
// reading its payload from r.
func (dc *dataConn) readEnd(r io.Reader, h frameHeader, full bool) error {
	payload := make([]byte, h.length)
	if err := readPayload(r, h, payload); err != nil {
		return err
	}
	switch {
	case h.typ == frameError:
		return decodeError("read", dc.addr, payload)
	case h.typ != frameOK || len(payload) != 1:
		return protocolError("unexpected %v frame answering a read", h.typ)
	case payload[0] == 1:
		return errChunkEnd
	case !full:
		return protocolError("read answered short without end of chunk")
	}
	return nil
}

// Close closes the idle connections; requests in flight finish on theirs.
func (c *DataClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for addr, l := range c.idle {
		for _, dc := range l {
			dc.conn.Close()
		}
		delete(c.idle, addr)
	}
	return nil
}
