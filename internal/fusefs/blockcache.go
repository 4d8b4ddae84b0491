package fusefs

import (
	"container/list"
	"sync"
)

// cacheBlockSize is the unit of the block cache: reads that miss fetch
// whole aligned blocks, so a random reader's later reads nearby hit.
const cacheBlockSize = 128 << 10

// blockCache keeps file data in the mount's memory, across opens, up to a
// byte budget (Config.CacheSize), least recently used blocks going first:
// GlusterFS's io-cache translator. It answers reads the kernel's page
// cache does not, for instance after the page cache was dropped
// (posix_fadvise(POSIX_FADV_DONTNEED), as fio does before each job, or
// memory pressure).
//
// The blocks of a file are valid for one version of it (size, mtime): an
// open that finds another version on the cluster, while this mount has no
// writer of the file open, drops them. Writes through this mount update
// the blocks they fall in (or drop them when they extend one), so the
// blocks always hold what this mount's readers must see, pushed or not;
// after a close pushed them, the cluster's new version is recorded as the
// blocks' own.
type blockCache struct {
	mu    sync.Mutex // guards everything below, and every cachedFile and cacheBlock
	limit int64
	size  int64
	files map[uint64]*cachedFile
	lru   list.List // of *cacheBlock, most recently used first
}

// cachedFile is the cache of one file, by inode number.
type cachedFile struct {
	ver     version
	wgen    uint64 // bumped by every change: fills read before it are dropped
	tail    int64  // index of the file's last, short block if cached, or -1
	writers int    // handles of this mount open for writing
	handles int    // handles of this mount open
	blocks  map[int64]*list.Element
}

// cacheBlock is cacheBlockSize bytes of a file at idx*cacheBlockSize;
// fewer for the file's last block.
type cacheBlock struct {
	ino  uint64
	idx  int64
	data []byte
}

func newBlockCache(limit int64) *blockCache {
	return &blockCache{limit: limit, files: map[uint64]*cachedFile{}}
}

func (c *blockCache) fileLocked(ino uint64) *cachedFile {
	f := c.files[ino]
	if f == nil {
		f = &cachedFile{blocks: map[int64]*list.Element{}, tail: -1}
		c.files[ino] = f
	}
	return f
}

// opened checks the blocks of ino against its version v on the cluster at
// an open, and counts the open if it writes.
func (c *blockCache) opened(ino uint64, v version, write bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.fileLocked(ino)
	if f.ver != v {
		if f.writers == 0 {
			c.dropLocked(f)
		}
		// With a writer open, this mount's own pushes explain the change
		// and the blocks already hold its writes.
		f.ver = v
	}
	f.handles++
	if write {
		f.writers++
	}
}

// closed uncounts an open of ino.
func (c *blockCache) closed(ino uint64, write bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[ino]
	if f == nil {
		return
	}
	if write && f.writers > 0 {
		f.writers--
	}
	if f.handles > 0 {
		f.handles--
	}
	if f.handles == 0 && len(f.blocks) == 0 {
		delete(c.files, ino)
	}
}

// pushed records v, read from the cluster after this mount pushed its
// writes of ino, as the version the blocks hold.
func (c *blockCache) pushed(ino uint64, v version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.files[ino]; f != nil {
		f.ver = v
	}
}

// retimed records that this mount changed only the times of ino, from
// version before to after: blocks valid for before stay valid.
func (c *blockCache) retimed(ino uint64, before, after version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.files[ino]; f != nil && f.ver == before {
		f.ver = after
	}
}

// generation returns the change count of ino, to be passed to fill.
func (c *blockCache) generation(ino uint64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fileLocked(ino).wgen
}

// read copies [off, off+len(dest)) of ino into dest if the cache holds all
// of it; n < len(dest) means the file ends there.
func (c *blockCache) read(ino uint64, dest []byte, off int64) (n int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[ino]
	if f == nil || len(f.blocks) == 0 {
		return 0, false
	}
	for n < len(dest) {
		pos := off + int64(n)
		e := f.blocks[pos/cacheBlockSize]
		if e == nil {
			return 0, false
		}
		b := e.Value.(*cacheBlock)
		in := int(pos % cacheBlockSize)
		if in >= len(b.data) {
			if len(b.data) == cacheBlockSize {
				return 0, false // cannot happen: in < cacheBlockSize
			}
			break // end of file
		}
		k := copy(dest[n:], b.data[in:])
		n += k
		if len(b.data) < cacheBlockSize && in+k == len(b.data) {
			break // end of file
		}
	}
	for i := off / cacheBlockSize; i <= (off+int64(max(n, 1))-1)/cacheBlockSize; i++ {
		if e := f.blocks[i]; e != nil {
			c.lru.MoveToFront(e)
		}
	}
	return n, true
}

// fill stores the whole blocks of data, read from the cluster at off; eof
// says data ends at the end of the file, so its last short block is the
// file's last. Data read before a change of the file (wgen) is dropped.
func (c *blockCache) fill(ino, wgen uint64, off int64, data []byte, eof bool) {
	if c.limit <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[ino]
	if f == nil || f.wgen != wgen {
		return
	}
	end := off + int64(len(data))
	for i := (off + cacheBlockSize - 1) / cacheBlockSize; i*cacheBlockSize < end; i++ {
		lo, hi := i*cacheBlockSize, min((i+1)*cacheBlockSize, end)
		if hi-lo < cacheBlockSize && !eof {
			break
		}
		if e := f.blocks[i]; e != nil {
			c.lru.MoveToFront(e)
			continue
		}
		b := &cacheBlock{ino: ino, idx: i, data: append([]byte(nil), data[lo-off:hi-off]...)}
		f.blocks[i] = c.lru.PushFront(b)
		c.size += int64(len(b.data))
		if len(b.data) < cacheBlockSize {
			f.tail = i
		}
	}
	for c.size > c.limit {
		c.evictLocked(c.lru.Back(), true)
	}
}

// write applies a write of p at off to the cached blocks of ino: blocks
// it covers whole are stored (write-through: what this mount wrote is what
// its readers read next), blocks it lies within are updated, and blocks
// it extends are dropped.
func (c *blockCache) write(ino uint64, p []byte, off int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[ino]
	if f == nil {
		return
	}
	f.wgen++
	if len(p) == 0 {
		return
	}
	end := off + int64(len(p))
	if e := f.blocks[f.tail]; e != nil && end > f.tail*cacheBlockSize+int64(len(e.Value.(*cacheBlock).data)) {
		// The file grows past its cached last block, which would
		// otherwise still say the file ends there.
		c.evictLocked(e, false)
	}
	for i := off / cacheBlockSize; i*cacheBlockSize < end; i++ {
		bo := i * cacheBlockSize
		lo, hi := max(off, bo), min(end, bo+cacheBlockSize)
		e := f.blocks[i]
		if lo == bo && hi == bo+cacheBlockSize {
			if e != nil {
				b := e.Value.(*cacheBlock)
				c.size += int64(cacheBlockSize - len(b.data))
				b.data = append(b.data[:0], p[lo-off:hi-off]...)
				if f.tail == i {
					f.tail = -1
				}
				c.lru.MoveToFront(e)
			} else {
				b := &cacheBlock{ino: ino, idx: i, data: append(make([]byte, 0, cacheBlockSize), p[lo-off:hi-off]...)}
				f.blocks[i] = c.lru.PushFront(b)
				c.size += cacheBlockSize
			}
			continue
		}
		if e == nil {
			continue
		}
		b := e.Value.(*cacheBlock)
		if hi-bo > int64(len(b.data)) {
			c.evictLocked(e, false) // the write extends the file's last block
			continue
		}
		copy(b.data[lo-bo:], p[lo-off:hi-off])
	}
	for c.size > c.limit {
		c.evictLocked(c.lru.Back(), true)
	}
}

// drop forgets every block of ino (truncation, removal).
func (c *blockCache) drop(ino uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.files[ino]; f != nil {
		c.dropLocked(f)
	}
}

func (c *blockCache) dropLocked(f *cachedFile) {
	f.wgen++
	for _, e := range f.blocks {
		c.evictLocked(e, false)
	}
}

// evictLocked removes a block; forget also drops its file's entry when
// that was its last block and no writer is open (the budget's evictions,
// which keep the table from growing with every file ever read).
func (c *blockCache) evictLocked(e *list.Element, forget bool) {
	b := c.lru.Remove(e).(*cacheBlock)
	c.size -= int64(len(b.data))
	if f := c.files[b.ino]; f != nil {
		delete(f.blocks, b.idx)
		if f.tail == b.idx {
			f.tail = -1
		}
		if forget && len(f.blocks) == 0 && f.handles == 0 {
			delete(c.files, b.ino)
		}
	}
}
