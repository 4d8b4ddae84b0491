package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The network calibration tasks: a sink that discards what it receives and a
// source that sends Bytes to it. They measure what the shaped testbed itself
// delivers to one TCP stream, the ceiling of every chunkfs figure.

// sink accepts connections until the run is cancelled or its input closes.
type sink struct {
	ln    net.Listener
	bytes atomic.Int64
	wg    sync.WaitGroup // the connection readers
}

func newSink(addr string) (*sink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &sink{ln: ln}, nil
}

// run serves until ctx is done; the coordinator ends it by closing the
// worker's standard input, which cancels ctx (see WorkerMain's caller).
func (s *sink) run(ctx context.Context) (Result, error) {
	start := time.Now()
	go func() {
		<-ctx.Done()
		s.ln.Close()
	}()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			break
		}
		s.wg.Add(1)
		go s.drain(c)
	}
	s.wg.Wait()
	return Result{Bytes: s.bytes.Load(), StartNS: start.UnixNano(), EndNS: time.Now().UnixNano()}, nil
}

// drain reads c to its end, then closes it, which tells the source that
// every byte has arrived.
func (s *sink) drain(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	n, _ := io.Copy(io.Discard, c)
	s.bytes.Add(n)
}

func (s *sink) close() error {
	if err := s.ln.Close(); !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// source sends Bytes on one connection and stops the clock when the sink has
// read them all and closed its end.
type source struct {
	conn  *net.TCPConn
	bytes int64
}

func newSource(ctx context.Context, addr string, bytes int64) (*source, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &source{conn: c.(*net.TCPConn), bytes: bytes}, nil
}

func (s *source) run(ctx context.Context) (Result, error) {
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	defer stop()
	buf := make([]byte, 256<<10)
	return timed(func() (int64, int64, error) {
		var sent int64
		for sent < s.bytes {
			n, err := s.conn.Write(buf[:min(int64(len(buf)), s.bytes-sent)])
			sent += int64(n)
			if err != nil {
				return sent, 1, err
			}
		}
		if err := s.conn.CloseWrite(); err != nil {
			return sent, 1, err
		}
		_, err := s.conn.Read(buf[:1])
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return sent, 1, err
	})
}

func (s *source) close() error { return s.conn.Close() }
