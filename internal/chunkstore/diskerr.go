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

// saved is a chunk's state before a mutation, to undo it: its length and
// checksums, and the old bytes at off that the mutation overwrites, if
// it saved them (see saveOverlapLocked).
type saved struct {
	length int64
	sums   []uint32
	off    int64
	bytes  []byte
}

func (c *chunk) saveLocked() saved {
	return saved{length: c.length, sums: append([]uint32(nil), c.sums...)}
}

// undoNoSpaceLocked undoes a mutation of c that ran out of space: the
// length and checksums go back to old, the old bytes it overwrote (if
// saved) are written back, the data file is cut back to the old length, the chunk is verified whole (a write into a hole of the
// file may have landed in part) and its metadata rewritten. Only if that
// fails is the replica marked corrupt. The error is KindNoSpace either way.
func (s *Store) undoNoSpaceLocked(op string, c *chunk, f File, old saved, err error) error {
	c.length, c.sums = old.length, old.sums
	c.metaSize = math.MaxInt
	var uerr error
	if old.bytes != nil {
		_, uerr = f.WriteAt(old.bytes, old.off) // space already held
	}
	if uerr == nil {
		uerr = f.Truncate(old.length)
	}
	if uerr == nil {
		uerr = verifyAllLocked(c, f)
	}
	if uerr == nil {
		uerr = s.writeMetaLocked(c, true)
	}
	if uerr != nil {
		s.markCorrupt(c, uerr)
	}
	return s.diskError(op, c, err)
}

// verifyAllLocked reads and checks every block of c from f.
func verifyAllLocked(c *chunk, f File) error {
	buf := make([]byte, min(c.length, 1<<20))
	for off := int64(0); off < c.length; off += int64(len(buf)) {
		p := buf[:min(int64(len(buf)), c.length-off)]
		if _, err := readLocked(c, f, off, p, nil); err != nil {
			return err
		}
	}
	return nil
}
