package chunkstore

import (
	"errors"
	"io"
	"os"
	"sync"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// scratch holds block-sized buffers for read-modify-write and unaligned reads.
var scratch = sync.Pool{New: func() any { return new([BlockSize]byte) }}

// checkRange validates a byte range of a chunk.
func (s *Store) checkRange(op string, h chunkfs.Handle, off, n int64) error {
	if off < 0 || n < 0 {
		return chunkfs.E(op, name(h), chunkfs.KindInvalid, "negative offset or length")
	}
	if off > s.cfg.MaxChunkSize || n > s.cfg.MaxChunkSize-off {
		return chunkfs.E(op, name(h), chunkfs.KindTooLarge, "beyond the largest chunk size")
	}
	return nil
}

// mutate runs fn on chunk h's open data file with the chunk locked, then
// rewrites the metadata. A full disk undoes the mutation and leaves the
// replica as it was (KindNoSpace); a failing disk fails the data
// directory; any other failure of the file system marks the chunk
// corrupt, since its data and metadata may then disagree (see diskerr.go).
// from is the lowest chunk offset the mutation may change (or, below the
// chunk's length, re-sum), so that only the checksums from there on are
// saved for an undo.
func (s *Store) mutate(op string, h chunkfs.Handle, from int64, fn func(c *chunk, f File, old *saved) error) error {
	c, unlock, err := s.lockUsable(op, h)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := s.cfg.FS.OpenFile(s.path(c, ".data"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return s.failLocked(op, c, err)
	}
	defer f.Close()
	old := c.saveLocked(from)
	err = fn(c, f, &old)
	if err == nil {
		err = s.writeMetaLocked(c, false)
	}
	switch {
	case err == nil:
		return nil
	case chunkfs.KindOf(err) == chunkfs.KindChecksum:
		s.markCorrupt(c, err)
		return errCorrupt(op, h)
	case isNoSpace(err):
		return s.undoNoSpaceLocked(op, c, f, old, err)
	}
	return s.failLocked(op, c, err)
}

// Write writes p at off in chunk h. A gap between the chunk's end and off
// reads as zeros.
func (s *Store) Write(h chunkfs.Handle, off int64, p []byte) error {
	return s.WriteWithSums(h, off, p, nil)
}

// WriteWithSums is Write given the checksums of p's BlockSize pieces
// (sums[i] covers p[i*BlockSize:min((i+1)*BlockSize, len(p))]), known from
// elsewhere; when off is block-aligned they are stored for the blocks p
// fills wholly instead of being computed again. sums may be nil.
func (s *Store) WriteWithSums(h chunkfs.Handle, off int64, p []byte, sums []uint32) error {
	if off%BlockSize != 0 || int64(len(sums)) != checksum.NumBlocks(int64(len(p))) {
		sums = nil
	}
	if err := s.checkRange("write", h, off, int64(len(p))); err != nil {
		return err
	}
	return s.mutate("write", h, off, func(c *chunk, f File, old *saved) error {
		if off > c.length {
			if err := extendLocked(c, f, off); err != nil {
				return err
			}
		}
		var err error
		if old.bytes, err = saveOverlapLocked(c, f, off, int64(len(p))); err != nil {
			return err
		}
		old.off = off
		return writeLocked(c, f, off, p, sums)
	})
}

// maxOverlapSaved bounds the old bytes a write saves to undo (see
// saveOverlapLocked).
const maxOverlapSaved = 4 << 20

// saveOverlapLocked returns the old bytes of c that a write of n bytes at
// off overwrites when it also extends the chunk (nil when it does not, or
// when they are more than maxOverlapSaved): a disk that fills up fails
// such a write where it begins to allocate, past the old end, after it has
// overwritten the old bytes before it, which the undo (undoNoSpaceLocked)
// then puts back. A write that only overwrites allocates nothing (except
// into a hole left by padding or truncation) and saves nothing. Sequential
// writes and appends start at the end: nothing to save.
func saveOverlapLocked(c *chunk, f File, off, n int64) ([]byte, error) {
	if off >= c.length || off+n <= c.length || c.length-off > maxOverlapSaved {
		return nil, nil
	}
	saved := make([]byte, c.length-off)
	if _, err := f.ReadAt(saved, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errCorrupt("write", c.handle) // file shorter than its metadata says
		}
		return nil, err
	}
	return saved, nil
}

// Pad extends chunk h with zeros up to length to; it does nothing if the
// chunk is as long already.
func (s *Store) Pad(h chunkfs.Handle, to int64) error {
	if err := s.checkRange("pad", h, to, 0); err != nil {
		return err
	}
	return s.mutate("pad", h, to, func(c *chunk, f File, _ *saved) error {
		if to <= c.length {
			return nil
		}
		return extendLocked(c, f, to)
	})
}

// Truncate cuts chunk h to size bytes, or extends it with zeros.
func (s *Store) Truncate(h chunkfs.Handle, size int64) error {
	if err := s.checkRange("truncate", h, size, 0); err != nil {
		return err
	}
	return s.mutate("truncate", h, size, func(c *chunk, f File, _ *saved) error {
		if size >= c.length {
			return extendLocked(c, f, size)
		}
		return shrinkLocked(c, f, size)
	})
}

// extendLocked grows c with zeros to length to, cutting off first any bytes
// a torn write may have left beyond the chunk's end.
func extendLocked(c *chunk, f File, to int64) error {
	if err := f.Truncate(c.length); err != nil {
		return err
	}
	if err := f.Truncate(to); err != nil {
		return err
	}
	for pos := c.length; pos < to; {
		b := pos / BlockSize
		n := min(to, (b+1)*BlockSize) - pos
		if b < int64(len(c.sums)) {
			c.sums[b] = checksum.Zeros(c.sums[b], int(n))
		} else if n == BlockSize {
			c.sums = append(c.sums, checksum.ZeroBlock)
		} else {
			c.sums = append(c.sums, checksum.Zeros(0, int(n)))
		}
		pos += n
	}
	c.length = to
	return nil
}

// shrinkLocked cuts c to size, verifying and re-summing the block that
// becomes the last.
func shrinkLocked(c *chunk, f File, size int64) error {
	b := size / BlockSize
	var sum uint32
	if keep := size - b*BlockSize; keep > 0 {
		buf := scratch.Get().(*[BlockSize]byte)
		defer scratch.Put(buf)
		old, err := readBlockLocked(c, f, b, buf[:])
		if err != nil {
			return err
		}
		sum = checksum.Sum(old[:keep])
	}
	if err := f.Truncate(size); err != nil {
		return err
	}
	c.sums = c.sums[:checksum.NumBlocks(size)]
	if size%BlockSize != 0 {
		c.sums[b] = sum
	}
	c.length = size
	return nil
}

// readBlockLocked reads block b of c into buf and verifies it.
func readBlockLocked(c *chunk, f File, b int64, buf []byte) ([]byte, error) {
	start := b * BlockSize
	n := min(BlockSize, c.length-start)
	buf = buf[:n]
	if _, err := f.ReadAt(buf, start); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errCorrupt("read", c.handle) // file shorter than its metadata says
		}
		return nil, err
	}
	if checksum.Sum(buf) != c.sums[b] {
		return nil, errCorrupt("read", c.handle)
	}
	return buf, nil
}

// writeLocked writes p at off ≤ c.length, updating the block checksums:
// blocks p covers wholly are summed from p, blocks p extends at their end
// are updated incrementally, and any other block p touches is read,
// verified and re-summed. Without known sums it goes segment by segment,
// summing each just before writing it, so the data passes through memory
// once while hot; with them (a push's frame checksums) p is not summed
// here, so it is written with one call.
func writeLocked(c *chunk, f File, off int64, p []byte, known []uint32) error {
	end := off + int64(len(p))
	newLen := max(c.length, end)
	sums := c.sums
	for segStart := off; segStart < end; {
		segEnd := end
		if known == nil {
			segEnd = min(end, (segStart/writeSegment+1)*writeSegment)
		}
		for b := segStart / BlockSize; b*BlockSize < segEnd; b++ {
			sum, err := blockSumLocked(c, f, b, off, p, newLen, known)
			if err != nil {
				return err
			}
			if b < int64(len(sums)) {
				sums[b] = sum
			} else {
				sums = append(sums, sum)
			}
		}
		if _, err := f.WriteAt(p[segStart-off:segEnd-off], segStart); err != nil {
			return err
		}
		segStart = segEnd
	}
	c.sums, c.length = sums, newLen
	return nil
}

// writeSegment is the unit in which writeLocked sums and writes: a multiple
// of BlockSize that stays in a core's cache.
const writeSegment = 4 * BlockSize

// blockSumLocked returns block b's checksum once p is written at off;
// known, if not nil, holds the sums of p's blocks (off is then aligned).
func blockSumLocked(c *chunk, f File, b, off int64, p []byte, newLen int64, known []uint32) (uint32, error) {
	bs, be := b*BlockSize, min((b+1)*BlockSize, newLen)
	from, to := max(off, bs), min(off+int64(len(p)), be)
	newPart := p[from-off : to-off]
	oldEnd := min(max(c.length, bs), be) // old bytes of the block are [bs, oldEnd)
	switch {
	case from == bs && to == be && known != nil:
		return known[(bs-off)/BlockSize], nil
	case from == bs && to == be:
		return checksum.Sum(newPart), nil
	case from == oldEnd && to == be:
		prev := uint32(0)
		if oldEnd > bs {
			prev = c.sums[b]
		}
		return checksum.Update(prev, newPart), nil
	}
	buf := scratch.Get().(*[BlockSize]byte)
	defer scratch.Put(buf)
	old, err := readBlockLocked(c, f, b, buf[:])
	if err != nil {
		return 0, err
	}
	blk := buf[:be-bs]
	clear(blk[len(old):])
	copy(blk[from-bs:], newPart)
	return checksum.Sum(blk), nil
}

// Read reads up to len(p) bytes at off from chunk h, verifying every block
// it covers first. It returns n < len(p) and io.EOF when the chunk ends
// first; a block that fails its checksum marks the chunk corrupt and
// returns an error of KindChecksum.
func (s *Store) Read(h chunkfs.Handle, off int64, p []byte) (int, error) {
	n, _, err := s.ReadWithSums(h, off, p, nil)
	return n, err
}

// ReadWithSums is Read that also appends to sums the checksums of the
// blocks returned whole when off is a multiple of BlockSize: sums[i] is
// then the CRC32C of p[i*BlockSize:min((i+1)*BlockSize, n)] for every
// block returned whole (the chunk's last, short block included).
func (s *Store) ReadWithSums(h chunkfs.Handle, off int64, p []byte, sums []uint32) (int, []uint32, error) {
	if err := s.checkRange("read", h, off, 0); err != nil {
		return 0, sums, err
	}
	c, err := s.get("read", h)
	if err != nil {
		return 0, sums, err
	}
	return s.readChunk(c, nil, off, p, sums)
}

// readChunk is ReadWithSums of chunk c from its data file f, or from a
// file it opens when f is nil.
func (s *Store) readChunk(c *chunk, f File, off int64, p []byte, sums []uint32) (int, []uint32, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := s.usableLocked("read", c); err != nil {
		return 0, sums, err
	}
	if off >= c.length {
		return 0, sums, io.EOF
	}
	n := min(int64(len(p)), c.length-off)
	if f == nil {
		of, err := s.cfg.FS.OpenFile(s.path(c, ".data"), os.O_RDONLY, 0)
		if err != nil {
			return 0, sums, s.diskError("read", c, err)
		}
		defer of.Close()
		f = of
	}
	sums, err := readLocked(c, f, off, p[:n], sums)
	if err != nil {
		if chunkfs.KindOf(err) == chunkfs.KindChecksum {
			s.markCorrupt(c, err)
		}
		return 0, sums, s.diskError("read", c, err)
	}
	if n < int64(len(p)) {
		return int(n), sums, io.EOF
	}
	return int(n), sums, nil
}

// readLocked fills p from off of c's data file f, verifying whole blocks.
// Aligned whole blocks are read straight into p; the partial blocks at
// either end go through a scratch buffer.
func readLocked(c *chunk, f File, off int64, p []byte, sums []uint32) ([]uint32, error) {
	end := off + int64(len(p))
	for pos := off; pos < end; {
		b := pos / BlockSize
		bs, be := b*BlockSize, min((b+1)*BlockSize, c.length)
		if pos == bs && be <= end {
			// Read the run of whole blocks in one call, then verify each.
			last := min(end, c.length)
			runEnd := bs + (last-bs)/BlockSize*BlockSize
			if last == c.length {
				runEnd = last
			}
			if err := readRun(c, f, p[pos-off:runEnd-off], pos); err != nil {
				return sums, err
			}
			if off%BlockSize == 0 {
				sums = append(sums, c.sums[b:checksum.NumBlocks(runEnd)]...)
			}
			pos = runEnd
			continue
		}
		buf := scratch.Get().(*[BlockSize]byte)
		blk, err := readBlockLocked(c, f, b, buf[:])
		if err == nil {
			pos += int64(copy(p[pos-off:], blk[pos-bs:]))
		}
		scratch.Put(buf)
		if err != nil {
			return sums, err
		}
	}
	return sums, nil
}

// Reader reads one chunk with its data file kept open, for a server that
// answers a long read piece by piece: one open per request rather than
// one per piece. Every read still verifies what it returns, under the
// chunk's lock, exactly as ReadWithSums does; a chunk deleted meanwhile
// reads as not existing. A Reader is used by one goroutine at a time.
type Reader struct {
	s *Store
	c *chunk
	f File
}

// OpenReader opens chunk h for reading.
func (s *Store) OpenReader(h chunkfs.Handle) (*Reader, error) {
	c, err := s.get("read", h)
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := s.usableLocked("read", c); err != nil {
		return nil, err
	}
	f, err := s.cfg.FS.OpenFile(s.path(c, ".data"), os.O_RDONLY, 0)
	if err != nil {
		return nil, s.diskError("read", c, err)
	}
	return &Reader{s: s, c: c, f: f}, nil
}

// Info returns what the store knows of the chunk.
func (r *Reader) Info() Info {
	r.c.mu.RLock()
	defer r.c.mu.RUnlock()
	return r.c.infoLocked()
}

// ReadWithSums is Store.ReadWithSums of the reader's chunk.
func (r *Reader) ReadWithSums(off int64, p []byte, sums []uint32) (int, []uint32, error) {
	if err := r.s.checkRange("read", r.c.handle, off, 0); err != nil {
		return 0, sums, err
	}
	return r.s.readChunk(r.c, r.f, off, p, sums)
}

// File returns the chunk's open data file when the store keeps its chunks
// in the operating system's file system (else nil), so that a server can
// send a range of it with sendfile once ReadWithSums has verified that
// range. Its bytes are not checked: a caller sends only ranges it has just
// verified, with their checksums, so that the receiver checks them again.
// It is valid until Close.
func (r *Reader) File() *os.File {
	if of, ok := r.f.(osFile); ok {
		return of.File
	}
	return nil
}

// Close closes the data file.
func (r *Reader) Close() error { return r.f.Close() }

// readRun reads whole blocks at pos into p and verifies them.
func readRun(c *chunk, f File, p []byte, pos int64) error {
	if _, err := f.ReadAt(p, pos); err != nil {
		if errors.Is(err, io.EOF) {
			return errCorrupt("read", c.handle)
		}
		return err
	}
	if checksum.Verify(p, c.sums[pos/BlockSize:]) != nil {
		return errCorrupt("read", c.handle)
	}
	return nil
}

// Verify reads and checks every block of chunk h, as a scrubber does; a
// failure marks the chunk corrupt.
func (s *Store) Verify(h chunkfs.Handle) error {
	buf := make([]byte, 1<<20)
	for off := int64(0); ; off += int64(len(buf)) {
		_, err := s.Read(h, off, buf)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
