package rpc

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/reqid"
)

// StreamHandler is what a StreamServer serves: a place to keep pushed data
// and verified chunk reads. Both must be safe for concurrent use.
type StreamHandler interface {
	// BeginPush returns a buffer of n bytes to receive data id into. The
	// server calls done(sums, true) once the buffer holds the whole data,
	// checked, or done(nil, false) if the push failed; then it no longer
	// touches buf. When the data came in frames of chunkfs.BlockSize bytes
	// (the last may be short), sums[i] is the CRC32C of its block i, as
	// checked on arrival; otherwise sums is nil.
	BeginPush(id chunkfs.DataID, n int64) (buf []byte, done func(sums []uint32, ok bool), err error)
	// ReadChunk reads up to len(p) verified bytes at off from chunk h, whose
	// replica version must be at least v, with the semantics of
	// chunkstore.Store.ReadWithSums: io.EOF when the chunk ends first, and
	// the checksums of the blocks returned whole appended to sums when off
	// is block-aligned.
	ReadChunk(h chunkfs.Handle, v chunkfs.Version, off int64, p []byte, sums []uint32) (int, []uint32, error)
}

// StreamConfig configures a StreamServer.
type StreamConfig struct {
	// IdleTimeout bounds the wait for the next request on a connection,
	// once it has sent its magic or had its last request answered: a
	// connection that then sends nothing for this long is closed, so idle
	// connections cannot pile up. It is longer than the time a client
	// keeps an idle connection for reuse (DefaultIdleAge).
	IdleTimeout time.Duration
	// FrameTimeout bounds the wait for each frame inside a request, and
	// each write of an answer.
	FrameTimeout time.Duration
	// Client forwards pushes to the next replica of a chain.
	Client *DataClient
	Logger *slog.Logger
	// NoSendfile sends reads from memory even when the handler keeps its
	// chunks in files (see ChunkOpener).
	NoSendfile bool
	// BackgroundRate is the bytes a second this server's background reads
	// (the reads of the clones it is the source of) share, each paced on
	// its socket (readPacer): the outbound clone-source throttle.
	// 0: never paced.
	BackgroundRate int64
	// YieldRate is the bytes a second this server's other reads, clients'
	// and background ones, share while it serves an urgent read (a clone
	// of a chunk it holds the one live replica of), each paced on its
	// socket. 0: they do not yield.
	YieldRate int64
	// Authorize, when set, decides on every request before anything is
	// read from a chunk or kept of a push; its error is the answer (the
	// pushed data is received and dropped, so the connection stays in
	// step). Nil lets every request through.
	Authorize func(StreamRequest) error
}

// StreamRequest is what Authorize decides on: a request, the connection
// it came on (for ConnIdentity) and the token it carries.
type StreamRequest struct {
	Conn   net.Conn
	Push   bool           // a push; else a read of Handle
	Handle chunkfs.Handle // the chunk a read names; zero for a push
	Token  []byte         // nil when the request carries none
}

// DefaultStreamIdle is the default IdleTimeout: twice DefaultIdleAge.
const DefaultStreamIdle = 2 * DefaultIdleAge

// DefaultStreamConfig returns the default configuration, with its own
// forwarding client.
func DefaultStreamConfig() StreamConfig {
	return StreamConfig{IdleTimeout: DefaultStreamIdle, FrameTimeout: 30 * time.Second, Client: NewDataClient(), Logger: slog.Default()}
}

// Validate reports whether c is usable.
func (c *StreamConfig) Validate() error {
	switch {
	case c.IdleTimeout <= 0 || c.FrameTimeout <= 0:
		return errors.New("stream: timeouts must be positive")
	case c.Client == nil:
		return errors.New("stream: no forwarding client")
	case c.Logger == nil:
		return errors.New("stream: no logger")
	case c.BackgroundRate < 0 || c.YieldRate < 0:
		return errors.New("stream: negative background or yield rate")
	}
	return nil
}

// StreamServer serves the data stream on connections handed to it.
type StreamServer struct {
	h     StreamHandler
	cfg   StreamConfig
	log   *slog.Logger
	pacer *readPacer

	mu     sync.Mutex // guards conns and closed
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewStreamServer returns a server of h.
func NewStreamServer(h StreamHandler, cfg StreamConfig) (*StreamServer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &StreamServer{h: h, cfg: cfg, log: reqid.Logger(cfg.Logger), pacer: newReadPacer(cfg.BackgroundRate, cfg.YieldRate, setPacing),
		conns: make(map[net.Conn]struct{})}, nil
}

// ReadTotals counts the reads the server has served since it started.
func (s *StreamServer) ReadTotals() ReadTotals { return s.pacer.totals() }

// Serve accepts connections from lis, serving each in its own goroutine,
// until lis fails or the server is closed.
func (s *StreamServer) Serve(lis net.Listener) error {
	for {
		conn, err := lis.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			return err
		}
		if !s.track(conn) {
			conn.Close()
			return nil
		}
		go s.serveConn(conn)
	}
}

func (s *StreamServer) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *StreamServer) track(conn net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[conn] = struct{}{}
	s.wg.Add(1)
	return true
}

// Close closes every connection and waits for their goroutines.
func (s *StreamServer) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// ServeConn serves one connection until it closes or breaks the protocol.
func (s *StreamServer) ServeConn(conn net.Conn) {
	if s.track(conn) {
		s.serveConn(conn)
	} else {
		conn.Close()
	}
}

func (s *StreamServer) serveConn(conn net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
	}()
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("data stream panic", "remote", conn.RemoteAddr(), "panic", r, "stack", string(debug.Stack()))
		}
	}()
	sc := &streamConn{s: s, conn: conn, r: bufio.NewReaderSize(conn, readBuffer)}
	err := sc.serve()
	var perr *errProtocol
	switch {
	case errors.As(err, &perr):
		s.log.Warn("data stream connection closed", "remote", conn.RemoteAddr(), "reason", perr.reason)
	case err != nil && !errors.Is(err, io.EOF) && !s.isClosed():
		s.log.Info("data stream connection closed", "remote", conn.RemoteAddr(), "err", err)
	}
}

// streamConn is the server side of one connection; it is used by one
// goroutine.
type streamConn struct {
	s    *StreamServer
	conn net.Conn
	r    *bufio.Reader
	hdr  [frameHeaderSize]byte
	req  []byte          // request payload buffer
	hdrs []byte          // headers of the frames being sent
	bufs net.Buffers     // their writev vector
	lens []int           // their payload lengths
	raw  syscall.RawConn // the TCP socket for sendfile; nil until a read needs it
	// pending logs the current request's trace (traced); nil when it has
	// none or it is logged.
	pending func(answer error)
}

func (c *streamConn) serve() error {
	c.conn.SetReadDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	var magic [len(StreamMagic)]byte
	if _, err := io.ReadFull(c.r, magic[:]); err != nil {
		return err
	}
	if string(magic[:]) != StreamMagic {
		return protocolError("bad magic %q", magic[:])
	}
	for {
		c.conn.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		if err := c.serveRequest(); err != nil {
			return err
		}
	}
}

func (c *streamConn) serveRequest() error {
	h, err := readHeader(c.r, c.hdr[:])
	if err != nil {
		return err
	}
	c.conn.SetReadDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	if cap(c.req) < h.length {
		c.req = make([]byte, h.length)
	}
	payload := c.req[:h.length]
	if err := readPayload(c.r, h, payload); err != nil {
		return err
	}
	switch h.typ {
	case framePush:
		req, err := decodePush(payload)
		if err != nil {
			return err
		}
		defer c.traced(req.reqID, "push", "data_id", req.id, "bytes", req.length, "downstream", len(req.chain))(&err)
		err = c.servePush(req, c.authorize(StreamRequest{Conn: c.conn, Push: true, Token: req.token}))
		return err
	case frameRead, frameBackgroundRead, frameUrgentRead:
		req, err := decodeRead(payload)
		if err != nil {
			return err
		}
		req.class = frameClass(h.typ)
		defer c.traced(req.reqID, "read", "handle", req.handle, "offset", req.off, "length", req.length)(&err)
		if err = c.authorize(StreamRequest{Conn: c.conn, Handle: req.handle, Token: req.token}); err != nil {
			err = c.reply(frameError, encodeError(err))
			return err
		}
		err = c.serveRead(req)
		return err
	}
	return protocolError("unexpected %v frame for a request", h.typ)
}

// traced arranges for a request that carries request ID id to be logged
// at debug level, once: just before its answer's last frame is written
// (reply), so that the line is there by the time the requester has its
// answer, or, when the request ends without one (the connection broke),
// by the returned function, given the request's error. The line says what
// the request was (args), how long it took and the error it was answered
// with, if any. Requests without an ID are not logged, as gRPC calls
// without one are not.
func (c *streamConn) traced(id, what string, args ...any) func(*error) {
	c.pending = nil
	ctx := reqid.With(context.Background(), id)
	if id == "" || !c.s.log.Enabled(ctx, slog.LevelDebug) {
		return func(*error) {}
	}
	start := time.Now()
	c.pending = func(err error) {
		args = append(args, "took", time.Since(start))
		if err != nil {
			args = append(args, "err", err.Error())
		}
		c.s.log.DebugContext(ctx, "data stream "+what, args...)
	}
	return func(err *error) {
		if c.pending != nil {
			c.pending(*err)
			c.pending = nil
		}
	}
}

// authorize asks the configured Authorize about r.
func (c *streamConn) authorize(r StreamRequest) error {
	if c.s.cfg.Authorize == nil {
		return nil
	}
	return c.s.cfg.Authorize(r)
}

// reply writes one frame with a deadline. An ok or error frame ends the
// request's answer: its trace, if any, is logged first.
func (c *streamConn) reply(t frameType, payload []byte) error {
	if c.pending != nil && (t == frameOK || t == frameError) {
		var answer error
		if t == frameError {
			answer = decodeError("", "", payload)
		}
		c.pending(answer)
		c.pending = nil
	}
	c.conn.SetWriteDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	_, err := c.conn.Write(appendFrame(nil, t, payload))
	return err
}

// frameClass is the class of a read sent in a frame of type t.
func frameClass(t frameType) readClass {
	switch t {
	case frameBackgroundRead:
		return backgroundRead
	case frameUrgentRead:
		return urgentRead
	}
	return foregroundRead
}
