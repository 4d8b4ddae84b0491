package rpc

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
)

// fileHandler is a memHandler whose chunks are also files, opened once per
// read request (ChunkOpener, as the chunkserver does), so reads are sent
// from the files with sendfile. tamper, when set, flips a byte of the file
// after each piece has been verified, as an overwrite racing the send
// would.
type fileHandler struct {
	*memHandler
	dir    string
	opened atomic.Int32
	closed chan struct{} // a token for every opened chunk closed
	tamper atomic.Bool
}

func newFileHandler(t *testing.T) *fileHandler {
	return &fileHandler{memHandler: newMemHandler(), dir: t.TempDir(), closed: make(chan struct{}, 1024)}
}

func (f *fileHandler) path(h chunkfs.Handle) string {
	return filepath.Join(f.dir, string(rune('a'+int(h))))
}

func (f *fileHandler) add(t *testing.T, h chunkfs.Handle, data []byte) {
	f.mu.Lock()
	f.chunks[h] = memChunk{version: 1, data: data}
	f.mu.Unlock()
	if err := os.WriteFile(f.path(h), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fileHandler) OpenChunk(h chunkfs.Handle, v chunkfs.Version) (OpenChunk, error) {
	file, err := os.Open(f.path(h))
	if err != nil {
		return nil, chunkfs.E("read", "", chunkfs.KindNotExist, err.Error())
	}
	f.opened.Add(1)
	return &fileChunk{handlerChunk: handlerChunk{h: f, hd: h, v: v}, file: file, closed: f.closed}, nil
}

// fileChunk is a chunk read through its handler and sent from its file.
type fileChunk struct {
	handlerChunk
	file   *os.File
	closed chan<- struct{}
}

func (c *fileChunk) File() *os.File { return c.file }

func (c *fileChunk) Close() error {
	err := c.file.Close()
	select {
	case c.closed <- struct{}{}:
	default:
	}
	return err
}

func (f *fileHandler) ReadChunk(h chunkfs.Handle, v chunkfs.Version, off int64, p []byte, sums []uint32) (int, []uint32, error) {
	n, sums, err := f.memHandler.ReadChunk(h, v, off, p, sums)
	if f.tamper.Load() && n > 0 {
		file, ferr := os.OpenFile(f.path(h), os.O_RDWR, 0)
		if ferr == nil {
			file.WriteAt([]byte{^p[0]}, off)
			file.Close()
		}
	}
	return n, sums, err
}

// TestReadSendfile reads ranges of a chunk kept in a file: aligned and
// not, across pieces, and past the end; every byte arrives as stored.
func TestReadSendfile(t *testing.T) {
	data := testData(3<<20+12345, 7)
	fh := newFileHandler(t)
	fh.add(t, 1, data)
	addr, _ := startStream(t, fh)
	c := NewDataClient()
	defer c.Close()
	for _, r := range []struct {
		off int64
		n   int
	}{{0, len(data)}, {0, 64 << 10}, {1000, 200000}, {256<<10 - 5, 300 << 10}, {512<<10 - 5, 3 << 20}, {1, 2<<20 + 7}, {int64(len(data)) - 70000, 70000}, {int64(len(data)) - 100, 5000}} {
		p := make([]byte, r.n)
		n, err := c.Read(context.Background(), addr, 1, 1, r.off, p)
		want := data[r.off:min(int(r.off)+r.n, len(data))]
		if len(want) < r.n {
			if err != io.EOF {
				t.Errorf("read %d at %d: %v, want io.EOF", r.n, r.off, err)
			}
		} else if err != nil {
			t.Errorf("read %d at %d: %v", r.n, r.off, err)
		}
		if !bytes.Equal(p[:n], want) {
			t.Errorf("read %d at %d: %d bytes, not the stored ones", r.n, r.off, n)
		}
	}
	if fh.opened.Load() == 0 {
		t.Error("no read was sent from the chunk's file")
	}
	if _, err := c.Read(context.Background(), addr, 9, 1, 0, make([]byte, 10)); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Errorf("read of a missing chunk: %v", err)
	}
}

// TestReadSendfileChangedFile: a range changed between its check and its
// send arrives with the checksums of the checked bytes, so the reader
// fails with KindChecksum "in transit", unlike a replica reporting its
// data corrupt.
func TestReadSendfileChangedFile(t *testing.T) {
	h := newFileHandler(t)
	data := testData(3<<20, 8) // several pieces: the reader verifies ahead of the sender
	h.add(t, 1, data)
	h.add(t, 2, data)
	h.mu.Lock()
	h.chunks[2] = memChunk{version: 1, data: data, corrupt: true}
	h.mu.Unlock()
	addr, _ := startStream(t, h)
	c := NewDataClient()
	defer c.Close()
	h.tamper.Store(true)
	_, err := c.Read(context.Background(), addr, 1, 1, 0, make([]byte, len(data)))
	if chunkfs.KindOf(err) != chunkfs.KindChecksum || !InTransit(err) {
		t.Fatalf("read of a range changed after its check: %v, want KindChecksum in transit", err)
	}
	// The server goes on reading ahead (and tampering) until it sees the
	// connection closed; it closes the chunk once its reader has stopped.
	select {
	case <-h.closed:
	case <-time.After(time.Minute):
		t.Fatal("the server never closed the chunk of a read whose reader went away")
	}
	_, err = c.Read(context.Background(), addr, 2, 1, 0, make([]byte, 10))
	if chunkfs.KindOf(err) != chunkfs.KindChecksum || InTransit(err) {
		t.Fatalf("read of a corrupt chunk: %v, want KindChecksum not in transit", err)
	}
	h.tamper.Store(false)
	h.add(t, 1, data)
	p := make([]byte, len(data))
	if _, err := c.Read(context.Background(), addr, 1, 1, 0, p); err != nil || !bytes.Equal(p, data) {
		t.Fatalf("read after the change: %v", err)
	}
}
