package chunkstore

import (
	"errors"
	"math"
	"syscall"

	"github.com/chunkfs/chunkfs"
)

// How the store tells the failures of its disks apart:
//
//   - A full disk (ENOSPC, EDQUOT) is KindNoSpace. The replica is not
//     corrupt: a mutation that ran out of space is undone (see
//     undoNoSpaceLocked), and the chunk stays as it was.
//   - A failing disk (EIO, EROFS, EACCES: a bad disk, a file system
//     remounted read-only after errors, a directory made unwritable) fails
//     its whole data directory: every replica in it is marked corrupt, so
//     heartbeats report them and the master copies them elsewhere, and no
//     new replica goes there. The server and its other directories go on.
//   - Anything else fails the one replica, marked corrupt, as its files
//     may no longer match its metadata.

// isNoSpace reports whether err says the disk is full.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// isDiskFailure reports whether err says the disk or directory failed.
func isDiskFailure(err error) bool {
	return errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES)
}

// diskError classifies a failed file-system call on chunk c: a full disk
// is KindNoSpace; a failing disk fails c's data directory.
func (s *Store) diskError(op string, c *chunk, err error) error {
	var ce *chunkfs.Error
	if errors.As(err, &ce) {
		return err
	}
	kind := chunkfs.KindOther
	switch {
	case isNoSpace(err):
		kind = chunkfs.KindNoSpace
	case isDiskFailure(err):
		s.failDir(c.dir, err)
	}
	return &chunkfs.Error{Op: op, Path: name(c.handle), Kind: kind, Err: err}
}

// failLocked handles a failed disk operation on c other than a mutation's
// (see mutate): a full disk leaves c as it is, though its metadata file,
// rewritten in place, may be torn and is rewritten whole next time; any
// other failure marks c corrupt, its files possibly no longer matching
// its metadata.
func (s *Store) failLocked(op string, c *chunk, err error) error {
	if isNoSpace(err) {
		c.metaSize = math.MaxInt // truncate it on the next rewrite
	} else {
		s.markCorrupt(c, err)
	}
	return s.diskError(op, c, err)
}

// failDir marks data directory d failed, and every replica in it corrupt.
func (s *Store) failDir(d int, err error) {
	s.mu.Lock()
	if s.failed[d] {
		s.mu.Unlock()
		return
	}
	s.failed[d] = true
	var in []*chunk
	for _, c := range s.chunks {
		if c.dir == d {
			in = append(in, c)
		}
	}
	s.mu.Unlock()
	s.log.Error("data directory failed; its replicas are reported corrupt and no new one goes there", "dir", s.cfg.Dirs[d], "replicas", len(in), "err", err)
	for _, c := range in {
		c.corrupt.Store(true) // atomic: no chunk lock needed, and none taken
	}
}

// FailedDirs returns the data directories that failed since the store opened.
func (s *Store) FailedDirs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i, f := range s.failed {
		if f {
			out = append(out, s.cfg.Dirs[i])
		}
	}
	return out
}

// saved is a chunk's state before a mutation, to undo it: its length,
// the checksums of its blocks from block first on (a mutation changes
// none before the block it begins in, nor, when it extends the chunk,
// before the old last block), and the old bytes at off that the mutation
// overwrites, if it saved them (see saveOverlapLocked).
type saved struct {
	length int64
	first  int64
	tail   []uint32
	off    int64
	bytes  []byte
}

// saveLocked saves c's state before a mutation that changes nothing below
// chunk offset from: an append saves one checksum, not the chunk's.
func (c *chunk) saveLocked(from int64) saved {
	first := min(max(from, 0), c.length) / BlockSize
	first = min(first, int64(len(c.sums)))
	return saved{length: c.length, first: first, tail: append([]uint32(nil), c.sums[first:]...)}
}

// restoreLocked puts back c's length and checksums as saved.
func (c *chunk) restoreLocked(old saved) {
	c.length = old.length
	c.sums = append(c.sums[:old.first], old.tail...)
}

// undoNoSpaceLocked undoes a mutation of c that ran out of space: the
// length and checksums go back to old, the old bytes it overwrote (if
// saved) are written back, the data file is cut back to the old length,
// the blocks it may have touched are verified (a write into a hole of the
// file may have landed in part) and the metadata is rewritten. Only if
// that fails is the replica marked corrupt. The error is KindNoSpace
// either way.
func (s *Store) undoNoSpaceLocked(op string, c *chunk, f File, old saved, err error) error {
	c.restoreLocked(old)
	c.metaSize = math.MaxInt
	var uerr error
	if old.bytes != nil {
		_, uerr = f.WriteAt(old.bytes, old.off) // space already held
	}
	if uerr == nil {
		uerr = f.Truncate(old.length)
	}
	if uerr == nil {
		uerr = verifyFromLocked(c, f, old.first*BlockSize)
	}
	if uerr == nil {
		uerr = s.writeMetaLocked(c, true)
	}
	if uerr != nil {
		s.markCorrupt(c, uerr)
	}
	return s.diskError(op, c, err)
}

// verifyFromLocked reads and checks every block of c from f from chunk
// offset from (a block boundary) on.
func verifyFromLocked(c *chunk, f File, from int64) error {
	buf := make([]byte, min(max(c.length-from, 0), 1<<20))
	for off := from; off < c.length; off += int64(len(buf)) {
		p := buf[:min(int64(len(buf)), c.length-off)]
		if _, err := readLocked(c, f, off, p, nil); err != nil {
			return err
		}
	}
	return nil
}
