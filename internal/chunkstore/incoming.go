package chunkstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// The files of a replica being built are named by the handle, these
// suffixes and a number unique in the store, until Commit renames them
// into place; a store opening a data directory removes any it finds, left
// by a crash.
const (
	incomingData = ".data.incoming"
	incomingMeta = ".meta.incoming"
)

// Incoming is a replica being built from data that arrives in order (a
// clone from another chunkserver). Nothing of it is visible, listed or
// read until Commit: a failure at any point leaves the store as it was,
// once Abort has removed the temporary files. An Incoming is used by one
// goroutine.
type Incoming struct {
	s    *Store
	c    *chunk // the new replica, not yet in the store's map
	tmp  string // suffix of its temporary files: ".<n>"
	f    File   // its temporary data file
	done bool
}

// BeginIncoming starts building replica h at version v. It fails with
// KindExist if the store holds h at v already and with KindStale if at a
// newer version; a replica at an older version is replaced by Commit.
func (s *Store) BeginIncoming(h chunkfs.Handle, v chunkfs.Version) (*Incoming, error) {
	dir, err := s.incomingDir(h, v)
	if err != nil {
		return nil, err
	}
	in := &Incoming{s: s, c: &chunk{handle: h, dir: dir, version: v}, tmp: fmt.Sprintf(".%d", s.incoming.Add(1))}
	if err := s.cfg.FS.MkdirAll(filepath.Dir(s.path(in.c, "")), 0o755); err != nil {
		return nil, s.diskError("clone", in.c, err)
	}
	f, err := s.cfg.FS.OpenFile(in.path(incomingData), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, s.diskError("clone", in.c, err)
	}
	in.f = f
	return in, nil
}

// incomingDir checks that h at v may be built, and picks its data
// directory: that of the replica it replaces if it works and has room,
// else the emptiest that does.
func (s *Store) incomingDir(h chunkfs.Handle, v chunkfs.Version) (int, error) {
	s.mu.Lock()
	old := s.chunks[h]
	s.mu.Unlock()
	if old == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.pickDirLocked("clone", h)
	}
	old.mu.RLock()
	defer old.mu.RUnlock()
	if err := replaceableLocked(old, v); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed[old.dir] || !s.hasRoom(old.dir) {
		return s.pickDirLocked("clone", h)
	}
	return old.dir, nil
}

// replaceableLocked fails unless replica old is older than version v (or
// corrupt, or deleted).
func replaceableLocked(old *chunk, v chunkfs.Version) error {
	switch {
	case old.corrupt.Load() || old.deleted:
		return nil
	case old.version == v:
		return chunkfs.E("clone", name(old.handle), chunkfs.KindExist, fmt.Sprintf("replica held at version %d", v))
	case old.version > v:
		return chunkfs.E("clone", name(old.handle), chunkfs.KindStale, fmt.Sprintf("replica held at version %d, newer than %d", old.version, v))
	}
	return nil
}

// path is the name of one of the temporary files.
func (in *Incoming) path(suffix string) string { return in.s.path(in.c, suffix+in.tmp) }

// Length returns the bytes written so far.
func (in *Incoming) Length() int64 { return in.c.length }

// Write appends p to the replica, summing its blocks.
func (in *Incoming) Write(p []byte) error {
	c := in.c
	if in.done {
		return errors.New("chunkstore: incoming replica finished")
	}
	if int64(len(p)) > in.s.cfg.MaxChunkSize-c.length {
		return chunkfs.E("clone", name(c.handle), chunkfs.KindTooLarge, "beyond the largest chunk size")
	}
	if _, err := in.f.WriteAt(p, c.length); err != nil {
		return in.s.diskError("clone", c, err)
	}
	for len(p) > 0 {
		b := c.length / BlockSize
		n := min(int64(len(p)), (b+1)*BlockSize-c.length)
		if b < int64(len(c.sums)) {
			c.sums[b] = checksum.Update(c.sums[b], p[:n])
		} else {
			c.sums = append(c.sums, checksum.Sum(p[:n]))
		}
		c.length += n
		p = p[n:]
	}
	return nil
}

// Commit makes the replica durable (data and metadata fsynced, then
// renamed into place) and puts it in the store, replacing an older replica
// of the handle. It fails as BeginIncoming does if a replica at its version
// or newer appeared meanwhile. Whatever happens, the Incoming is finished,
// and on failure its files are gone.
func (in *Incoming) Commit() (Info, error) {
	if in.done {
		return Info{}, errors.New("chunkstore: incoming replica finished")
	}
	in.done = true
	s, c := in.s, in.c
	err := in.f.Sync()
	if cerr := in.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		err = s.diskError("clone", c, err)
	} else {
		err = in.writeMeta()
	}
	if err == nil {
		err = s.install(c, in.path(incomingData), in.path(incomingMeta))
	}
	if err != nil {
		in.removeFiles()
		return Info{}, err
	}
	return c.infoLocked(), nil
}

// writeMeta writes and fsyncs the metadata under its temporary name.
func (in *Incoming) writeMeta() error {
	s, c := in.s, in.c
	f, err := s.cfg.FS.OpenFile(in.path(incomingMeta), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return s.diskError("clone", c, err)
	}
	defer f.Close()
	m := meta{handle: c.handle, version: c.version, length: c.length, sums: c.sums}
	buf := m.encode(make([]byte, 0, metaHeader+4+4*len(c.sums)))
	if _, err := f.WriteAt(buf, 0); err != nil {
		return s.diskError("clone", c, err)
	}
	c.metaSize = len(buf)
	if err := f.Sync(); err != nil {
		return s.diskError("clone", c, err)
	}
	return nil
}

// install puts c in the map in place of the replica it replaces (if any),
// then renames its files into place, with both locked meanwhile (as
// Create holds a new chunk locked until its files exist): readers wait,
// then read the new replica, or find none if the renames failed. The data
// file goes first: a crash between the renames leaves either no metadata
// (the data file is then an orphan, not loaded) or the old metadata beside
// new data, which fails its checksums and is reported corrupt, never
// served. Locks are taken chunk first, then store, as Delete does.
func (s *Store) install(c *chunk, data, meta string) error {
	s.mu.Lock()
	old := s.chunks[c.handle]
	s.mu.Unlock()
	if old != nil {
		old.mu.Lock()
		defer old.mu.Unlock()
		if err := replaceableLocked(old, c.version); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !s.swap(old, c) {
		return chunkfs.E("clone", name(c.handle), chunkfs.KindUnavailable, "replica changed during the clone; try again")
	}
	if old != nil {
		old.deleted = true
	}
	err := s.cfg.FS.Rename(data, s.path(c, ".data"))
	if err == nil {
		err = s.cfg.FS.Rename(meta, s.path(c, ".meta"))
	}
	if err != nil {
		c.deleted = true
		s.swap(c, old)
		if old != nil {
			old.deleted = false
			s.markCorrupt(old, err) // its files may be half replaced
		}
		return s.diskError("clone", c, err)
	}
	if old != nil && old.dir != c.dir {
		s.removeFiles(old) // best effort: its directory has failed
	}
	return nil
}

// swap replaces replica old (nil: none) of a handle in the map by c (nil:
// none), keeping the per-directory counts; it fails if the map no longer
// holds old.
func (s *Store) swap(old, c *chunk) bool {
	h := c
	if h == nil {
		h = old
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chunks[h.handle] != old {
		return false
	}
	if old != nil {
		s.perDir[old.dir]--
		delete(s.chunks, old.handle)
	}
	if c != nil {
		s.perDir[c.dir]++
		s.chunks[c.handle] = c
	}
	return true
}

// Abort drops the replica being built and its temporary files; after
// Commit it does nothing.
func (in *Incoming) Abort() {
	if in.done {
		return
	}
	in.done = true
	in.f.Close()
	in.removeFiles()
}

func (in *Incoming) removeFiles() {
	for _, suffix := range []string{incomingData, incomingMeta} {
		if err := in.s.cfg.FS.Remove(in.path(suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			in.s.log.Warn("remove incoming replica", "chunk", name(in.c.handle), "err", err)
		}
	}
}

// isIncoming reports whether name is a temporary file of an Incoming.
func isIncoming(name string) bool {
	return strings.Contains(name, incomingData+".") || strings.Contains(name, incomingMeta+".")
}
