package fusefs

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// TestBlockCacheModel drives the block cache with random writes, fills
// and reads against a model file: a read it answers is always the model's
// bytes, a fill read before a write is refused, and the budget holds.
func TestBlockCacheModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const limit = 6 * cacheBlockSize
	c := newBlockCache(limit)
	const ino = 7
	model := make([]byte, 5*cacheBlockSize+1234)
	for i := range model {
		model[i] = byte(r.IntN(256))
	}
	v := version{ok: true, size: int64(len(model)), mtime: time.Unix(1, 0)}
	c.opened(ino, v, true)
	hits := 0
	noise := make([]byte, 2*cacheBlockSize)
	for i := range noise {
		noise[i] = byte(r.IntN(256))
	}
	for step := 0; step < 5000; step++ {
		switch r.IntN(4) {
		case 0: // write inside the file or extending it
			off := int64(r.IntN(len(model) + 2*cacheBlockSize)) // sparse growth too
			if len(model) > 8*cacheBlockSize {
				model = model[:len(model)/2] // a truncation
				c.drop(ino)
			}
			p := make([]byte, 1+r.IntN(3*cacheBlockSize/2))
			src := noise[r.IntN(256):]
			copy(p, src[:min(len(src), len(p))])
			if end := off + int64(len(p)); end > int64(len(model)) {
				model = append(model, make([]byte, end-int64(len(model)))...)
			}
			copy(model[off:], p)
			c.write(ino, p, off)
		case 1: // a fill of what the cluster holds now
			w := c.generation(ino)
			off := int64(r.IntN(len(model)))
			n := min(r.IntN(4*cacheBlockSize), len(model)-int(off))
			c.fill(ino, w, off, append([]byte(nil), model[off:off+int64(n)]...), off+int64(n) == int64(len(model)))
		case 2: // a fill that raced with a write: refused
			w := c.generation(ino)
			c.write(ino, model[:1], 0)
			c.fill(ino, w, 0, bytes.Repeat([]byte{0xEE}, 2*cacheBlockSize), false)
		case 3:
			off := int64(r.IntN(len(model) + 10))
			dest := make([]byte, 1+r.IntN(2*cacheBlockSize))
			n, ok := c.read(ino, dest, off)
			if !ok {
				continue
			}
			hits++
			want := []byte{}
			if off < int64(len(model)) {
				want = model[off:min(int64(len(model)), off+int64(len(dest)))]
			}
			if !bytes.Equal(dest[:n], want) {
				t.Fatalf("step %d: read %d bytes at %d: got %d bytes, differing from the model's %d", step, len(dest), off, n, len(want))
			}
		}
		if c.size > limit {
			t.Fatalf("step %d: %d bytes cached, budget %d", step, c.size, limit)
		}
	}
	if hits == 0 {
		t.Fatal("no read was answered from the cache")
	}
}

// TestBlockCacheVersions: another version at open drops the blocks unless
// this mount has a writer open; a recorded push keeps them.
func TestBlockCacheVersions(t *testing.T) {
	c := newBlockCache(1 << 20)
	const ino = 3
	v1 := version{ok: true, size: 10, mtime: time.Unix(1, 0)}
	v2 := version{ok: true, size: 10, mtime: time.Unix(2, 0)}
	data := []byte("0123456789")
	c.opened(ino, v1, false)
	c.fill(ino, c.generation(ino), 0, data, true)
	dest := make([]byte, 4)
	if n, ok := c.read(ino, dest, 8); !ok || n != 2 || string(dest[:n]) != "89" {
		t.Fatalf("read at the end: %d %v %q", n, ok, dest[:n])
	}
	c.opened(ino, v1, false) // same version: kept
	if _, ok := c.read(ino, dest, 0); !ok {
		t.Fatal("blocks dropped at an open of the same version")
	}
	c.opened(ino, v2, true) // changed elsewhere: dropped
	if _, ok := c.read(ino, dest, 0); ok {
		t.Fatal("blocks kept although the file changed on the cluster")
	}
	c.fill(ino, c.generation(ino), 0, data, true)
	c.write(ino, []byte("ab"), 0)
	c.pushed(ino, version{ok: true, size: 10, mtime: time.Unix(3, 0)})
	c.closed(ino, true)
	c.opened(ino, version{ok: true, size: 10, mtime: time.Unix(3, 0)}, false)
	if n, ok := c.read(ino, dest, 0); !ok || string(dest[:n]) != "ab23" {
		t.Fatalf("after own write and push: %q %v", dest[:n], ok)
	}
	c.drop(ino)
	if _, ok := c.read(ino, dest, 0); ok {
		t.Fatal("read after drop")
	}
}
