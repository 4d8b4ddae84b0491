package rpc

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/chunkfs/chunkfs"
)

// fileHandler is a memHandler whose chunks are also files, so reads are
// sent from the files with sendfile (ChunkFiler). tamper, when set, flips a
// byte of the file after each piece has been verified, as an overwrite
// racing the send would.
type fileHandler struct {
	*memHandler
	dir    string
	opened atomic.Int32
	tamper atomic.Bool
}

func newFileHandler(t *testing.T) *fileHandler {
	return &fileHandler{memHandler: newMemHandler(), dir: t.TempDir()}
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

func (f *fileHandler) ChunkFile(h chunkfs.Handle) (*os.File, error) {
	f.opened.Add(1)
	return os.Open(f.path(h))
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

// openerHandler is a fileHandler that opens a chunk once per read
// request (ChunkOpener), as the chunkserver does.
type openerHandler struct{ *fileHandler }

func (o openerHandler) OpenChunk(h chunkfs.Handle, v chunkfs.Version) (OpenChunk, error) {
	f, err := o.ChunkFile(h)
	if err != nil {
		return nil, chunkfs.E("read", "", chunkfs.KindNotExist, err.Error())
	}
	return &handlerChunk{h: o.fileHandler, hd: h, v: v, file: f}, nil
}

// TestReadSendfile reads ranges of a chunk kept in a file: aligned and
// not, across pieces, and past the end; every byte arrives as stored,
// from a handler opening the file per request (ChunkFiler) and from one
// opening the chunk (ChunkOpener).
func TestReadSendfile(t *testing.T) {
	data := testData(3<<20+12345, 7)
	for _, opener := range []bool{false, true} {
		fh := newFileHandler(t)
		fh.add(t, 1, data)
		var h StreamHandler = fh
		if opener {
			h = openerHandler{fh}
		}
		addr, _ := startStream(t, h)
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
					t.Errorf("opener %v: read %d at %d: %v, want io.EOF", opener, r.n, r.off, err)
				}
			} else if err != nil {
				t.Errorf("opener %v: read %d at %d: %v", opener, r.n, r.off, err)
			}
			if !bytes.Equal(p[:n], want) {
				t.Errorf("opener %v: read %d at %d: %d bytes, not the stored ones", opener, r.n, r.off, n)
			}
		}
		if fh.opened.Load() == 0 {
			t.Errorf("opener %v: no read was sent from the chunk's file", opener)
		}
		if _, err := c.Read(context.Background(), addr, 9, 1, 0, make([]byte, 10)); chunkfs.KindOf(err) != chunkfs.KindNotExist {
			t.Errorf("opener %v: read of a missing chunk: %v", opener, err)
		}
	}
}

// TestReadSendfileChangedFile: a range changed between its check and its
// send arrives with the checksums of the checked bytes, so the reader
// fails with KindChecksum "in transit", unlike a replica reporting its
// data corrupt.
func TestReadSendfileChangedFile(t *testing.T) {
	h := newFileHandler(t)
	data := testData(1<<20, 8)
	h.add(t, 1, data)
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

// TestReadSendfileChangedFileOpener is TestReadSendfileChangedFile through
// a ChunkOpener, whose reader verifies pieces ahead of the sender.
func TestReadSendfileChangedFileOpener(t *testing.T) {
	fh := newFileHandler(t)
	data := testData(3<<20, 8)
	fh.add(t, 1, data)
	addr, _ := startStream(t, openerHandler{fh})
	c := NewDataClient()
	defer c.Close()
	fh.tamper.Store(true)
	_, err := c.Read(context.Background(), addr, 1, 1, 0, make([]byte, len(data)))
	if chunkfs.KindOf(err) != chunkfs.KindChecksum || !InTransit(err) {
		t.Fatalf("read of a range changed after its check: %v, want KindChecksum in transit", err)
	}
	fh.tamper.Store(false)
	fh.add(t, 1, data)
	p := make([]byte, len(data))
	if _, err := c.Read(context.Background(), addr, 1, 1, 0, p); err != nil || !bytes.Equal(p, data) {
		t.Fatalf("read after the change: %v", err)
	}
}
