// Package chunkstore keeps chunk replicas on local disks.
//
// Each chunk is a plain file, named by its handle only and placed in one of
// 256 fan-out folders of one of several data directories, grown only as it
// is written. Beside it a metadata file holds the chunk's version, length and
// a CRC32C per 64 KiB block. A write that touches part of a block first
// verifies the block's old contents, then recomputes its checksum; appends
// extend the last partial block's checksum without reading it back. Every
// read verifies the blocks it covers before returning a byte. A chunk whose
// data or metadata fails a check is marked corrupt and never served again.
//
// A replica copied from another server (a clone) is built as an Incoming,
// under temporary names, and appears whole or not at all. A full disk
// fails a mutation with KindNoSpace and leaves the replica as it was; a
// failing disk fails its data directory, whose replicas are then reported
// corrupt, while the other directories serve on (diskerr.go).
//
// A Store, made by Open over the data directories, is safe for concurrent
// use: mutations of one chunk are serialised, its reads run in parallel.
//
// All disk access goes through the small FS interface, so tests can use
// MemFS to simulate a crash in the middle of a write, or inject a full or
// failing disk.
package chunkstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// BlockSize is the unit of checksumming.
const BlockSize = chunkfs.BlockSize

// Config configures a Store.
type Config struct {
	Dirs         []string // data directories; chunks are spread over them
	FS           FS       // file system; OS{} by default
	MaxChunkSize int64    // largest chunk accepted, in bytes
	Reserve      int64    // bytes a disk keeps free: no new replica goes to one with less; 0: none
	Logger       *slog.Logger
}

// DefaultConfig returns a configuration with no data directory set.
func DefaultConfig() Config {
	return Config{FS: OS{}, MaxChunkSize: 1 << 30, Logger: slog.Default()}
}

// Validate reports whether c is usable.
func (c *Config) Validate() error {
	switch {
	case len(c.Dirs) == 0:
		return errors.New("chunkstore: no data directory")
	case c.FS == nil:
		return errors.New("chunkstore: no file system")
	case c.MaxChunkSize < BlockSize || c.MaxChunkSize%BlockSize != 0:
		return fmt.Errorf("chunkstore: max chunk size %d is not a positive multiple of %d", c.MaxChunkSize, BlockSize)
	case c.Logger == nil:
		return errors.New("chunkstore: no logger")
	case c.Reserve < 0:
		return errors.New("chunkstore: negative reserve")
	}
	for _, d := range c.Dirs {
		if d == "" {
			return errors.New("chunkstore: empty data directory name")
		}
	}
	return nil
}

// Info describes one chunk replica.
type Info struct {
	Handle  chunkfs.Handle
	Version chunkfs.Version
	Length  int64
	Corrupt bool
}

// Store is the set of chunk replicas on this server's disks. It is safe for
// concurrent use; operations on one chunk are serialized, reads of a chunk
// run in parallel.
type Store struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex // guards chunks, perDir and failed
	chunks map[chunkfs.Handle]*chunk
	perDir []int  // chunks held in each data directory
	failed []bool // data directories that failed (see failDir)

	syncs []*syncGroup // the Syncs of each data directory's chunks (syncgroup.go)

	incoming atomic.Uint64 // numbers the temporary files of Incoming replicas
}

// chunk is one replica. Its fields other than handle and dir are guarded by
// mu; corrupt may also be set under a read lock.
type chunk struct {
	handle chunkfs.Handle
	dir    int

	mu       sync.RWMutex // guards the fields below and the order of file I/O
	version  chunkfs.Version
	length   int64
	sums     []uint32
	metaSize int
	deleted  bool
	corrupt  atomic.Bool
}

// Open opens the store in cfg.Dirs, creating the directories as needed, and
// loads every chunk's metadata. Chunks whose metadata is unreadable are
// kept, marked corrupt, so that they are reported. A directory that fails
// with a disk error (see isDiskFailure) is left out, failed, as long as
// another one works.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, log: cfg.Logger, chunks: make(map[chunkfs.Handle]*chunk), perDir: make([]int, len(cfg.Dirs)), failed: make([]bool, len(cfg.Dirs))}
	for range cfg.Dirs {
		s.syncs = append(s.syncs, newSyncGroup())
	}
	for i, d := range cfg.Dirs {
		err := cfg.FS.MkdirAll(d, 0o755)
		if err == nil {
			err = s.loadDir(i)
		}
		if err != nil && (!isDiskFailure(err) || len(cfg.Dirs) == 1) {
			return nil, err
		}
		if err != nil {
			s.failDir(i, err) // the others serve on
		}
	}
	if len(s.FailedDirs()) == len(cfg.Dirs) {
		return nil, errors.New("chunkstore: every data directory has failed")
	}
	return s, nil
}

func (s *Store) loadDir(i int) error {
	fans, err := s.cfg.FS.ReadDir(s.cfg.Dirs[i])
	if err != nil {
		return err
	}
	for _, fan := range fans {
		if len(fan) != 2 || !isHex(fan) {
			continue
		}
		names, err := s.cfg.FS.ReadDir(filepath.Join(s.cfg.Dirs[i], fan))
		if err != nil {
			return err
		}
		for _, name := range names {
			if h, ok := parseMetaName(name); ok {
				s.load(i, h)
			} else if isIncoming(name) {
				s.removeIncoming(filepath.Join(s.cfg.Dirs[i], fan, name))
			}
		}
	}
	return nil
}

// removeIncoming removes a temporary file of a replica whose building a
// crash interrupted.
func (s *Store) removeIncoming(p string) {
	if err := s.cfg.FS.Remove(p); err != nil {
		s.log.Warn("remove unfinished incoming replica", "file", p, "err", err)
	}
}

func isHex(s string) bool {
	_, err := strconv.ParseUint(s, 16, 64)
	return err == nil && strings.ToLower(s) == s
}

func parseMetaName(name string) (chunkfs.Handle, bool) {
	base, ok := strings.CutSuffix(name, ".meta")
	if !ok || len(base) != 16 || !isHex(base) {
		return 0, false
	}
	h, _ := strconv.ParseUint(base, 16, 64)
	return chunkfs.Handle(h), true
}

// load reads one chunk's metadata; a bad one leaves the chunk marked
// corrupt. An empty metadata file is a chunk whose creation a crash
// interrupted before its first sync (createFiles): it never held data a
// client was promised, so its files are removed and it is not loaded.
func (s *Store) load(dir int, h chunkfs.Handle) {
	c := &chunk{handle: h, dir: dir}
	m, err := s.readMeta(c)
	if err == nil && m == nil {
		s.log.Info("chunk created but never synced before a crash; removing it", "chunk", name(h))
		s.removeFiles(c)
		return
	}
	if err == nil && m.handle != h {
		err = errBadMeta
	}
	if err != nil {
		s.log.Warn("chunk metadata unreadable; marking corrupt", "chunk", name(h), "err", err)
		c.corrupt.Store(true)
	} else {
		c.version, c.length, c.sums = m.version, m.length, m.sums
	}
	if prev := s.chunks[h]; prev != nil {
		// Two directories hold the handle (a clone replaced a replica of
		// a directory that failed, and it works again): keep the newer.
		keep, drop := newerReplica(prev, c)
		s.log.Warn("chunk held in two data directories; keeping the newer", "chunk", name(h), "kept", s.cfg.Dirs[keep.dir], "removed", s.cfg.Dirs[drop.dir])
		s.removeFiles(drop)
		s.perDir[prev.dir]-- // counted again below if kept
		c = keep
	}
	s.chunks[h] = c
	s.perDir[c.dir]++
}

// newerReplica orders two loaded replicas of one handle: a sound one
// before a corrupt one, then the higher version.
func newerReplica(a, b *chunk) (keep, drop *chunk) {
	if a.corrupt.Load() != b.corrupt.Load() {
		if a.corrupt.Load() {
			return b, a
		}
		return a, b
	}
	if b.version > a.version {
		return b, a
	}
	return a, b
}

// readMeta reads c's metadata file; an empty one gives no meta and no error.
func (s *Store) readMeta(c *chunk) (*meta, error) {
	f, err := s.cfg.FS.OpenFile(s.path(c, ".meta"), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > metaHeader+4+4*checksum.NumBlocks(s.cfg.MaxChunkSize) {
		return nil, errBadMeta
	}
	if size == 0 {
		return nil, nil // never synced: see load
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	c.metaSize = len(buf)
	return decodeMeta(buf, s.cfg.MaxChunkSize)
}

// name is how a chunk is named in errors and logs.
func name(h chunkfs.Handle) string { return fmt.Sprintf("chunk %016x", uint64(h)) }

// path returns the file of chunk c with the given suffix. It is built from
// the handle only.
func (s *Store) path(c *chunk, suffix string) string {
	h := uint64(c.handle)
	return filepath.Join(s.cfg.Dirs[c.dir], fmt.Sprintf("%02x", h&0xff), fmt.Sprintf("%016x%s", h, suffix))
}

func errNotExist(op string, h chunkfs.Handle) error {
	return chunkfs.E(op, name(h), chunkfs.KindNotExist, "no such chunk")
}

func errCorrupt(op string, h chunkfs.Handle) error {
	return &chunkfs.Error{Op: op, Path: name(h), Kind: chunkfs.KindChecksum, Err: checksum.ErrChecksum}
}

// get returns chunk h, or a NotExist error.
func (s *Store) get(op string, h chunkfs.Handle) (*chunk, error) {
	s.mu.Lock()
	c := s.chunks[h]
	s.mu.Unlock()
	if c == nil {
		return nil, errNotExist(op, h)
	}
	return c, nil
}

// Create makes an empty chunk h at version v. It fails with KindExist if the
// store holds h already.
func (s *Store) Create(h chunkfs.Handle, v chunkfs.Version) error {
	s.mu.Lock()
	if s.chunks[h] != nil {
		s.mu.Unlock()
		return chunkfs.E("create", name(h), chunkfs.KindExist, "chunk exists")
	}
	dir, err := s.pickDirLocked("create", h)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	c := &chunk{handle: h, dir: dir, version: v}
	c.mu.Lock() // held until the files exist
	defer c.mu.Unlock()
	s.chunks[h] = c
	s.perDir[c.dir]++
	s.mu.Unlock()
	if err := s.createFiles(c); err != nil {
		c.deleted = true
		s.forget(c)
		s.removeFiles(c)
		return s.diskError("create", c, err)
	}
	return nil
}

// removeFiles removes what is left of a chunk whose creation failed.
func (s *Store) removeFiles(c *chunk) {
	for _, suffix := range []string{".meta", ".data"} {
		if err := s.cfg.FS.Remove(s.path(c, suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("remove files of a chunk not created", "chunk", name(c.handle), "err", err)
		}
	}
}

// createFiles makes a new chunk's files without syncing them: a new chunk
// holds nothing a client was promised until its first Sync (or version
// change), which makes both files durable. A crash before that leaves an
// empty metadata file or none, and Open removes such a chunk (load). Two
// fsyncs fewer per replica of every new chunk: a small file's create
// paid six of its twenty disk syncs here.
func (s *Store) createFiles(c *chunk) error {
	if err := s.cfg.FS.MkdirAll(filepath.Dir(s.path(c, "")), 0o755); err != nil {
		return err
	}
	f, err := s.cfg.FS.OpenFile(s.path(c, ".data"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	return s.writeMetaLocked(c, false)
}

// pickDirLocked spreads chunks over the data directories that have not
// failed and have room (hasRoom): the one holding the fewest chunks gets
// the next. With none left it fails with KindNoSpace.
func (s *Store) pickDirLocked(op string, h chunkfs.Handle) (int, error) {
	best := -1
	for i, n := range s.perDir {
		if !s.failed[i] && (best < 0 || n < s.perDir[best]) && s.hasRoom(i) {
			best = i
		}
	}
	if best < 0 {
		return 0, chunkfs.E(op, name(h), chunkfs.KindNoSpace, fmt.Sprintf("no data directory that works has %d bytes free", s.cfg.Reserve))
	}
	return best, nil
}

// hasRoom reports whether data directory d's disk has more than Reserve
// bytes free, so a new replica may go there. A disk whose space cannot be
// told is taken to have room: its writes will say.
func (s *Store) hasRoom(d int) bool {
	if s.cfg.Reserve <= 0 {
		return true
	}
	disk, err := s.cfg.FS.Space(s.cfg.Dirs[d])
	return err != nil || disk.Free > s.cfg.Reserve
}

func (s *Store) forget(c *chunk) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chunks[c.handle] == c {
		delete(s.chunks, c.handle)
		s.perDir[c.dir]--
	}
}

// writeMetaLocked rewrites c's metadata file in place, fsyncing it if sync.
func (s *Store) writeMetaLocked(c *chunk, sync bool) error {
	f, err := s.cfg.FS.OpenFile(s.path(c, ".meta"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	m := meta{handle: c.handle, version: c.version, length: c.length, sums: c.sums}
	buf := m.encode(make([]byte, 0, metaHeader+4+4*len(c.sums)))
	if _, err := f.WriteAt(buf, 0); err != nil {
		return err
	}
	if len(buf) < c.metaSize {
		if err := f.Truncate(int64(len(buf))); err != nil {
			return err
		}
	}
	c.metaSize = len(buf)
	if sync {
		return f.Sync()
	}
	return nil
}

// SetVersion records a new version for chunk h, durably.
func (s *Store) SetVersion(h chunkfs.Handle, v chunkfs.Version) error {
	c, unlock, err := s.lockUsable("set version", h)
	if err != nil {
		return err
	}
	defer unlock()
	old := c.version
	c.version = v
	if err := s.writeMetaLocked(c, true); err != nil {
		c.version = old
		return s.failLocked("set version", c, err)
	}
	return nil
}

// lockUsable returns chunk h locked for a change, failing, unlocked, as
// get and usableLocked do; unlock releases it.
func (s *Store) lockUsable(op string, h chunkfs.Handle) (c *chunk, unlock func(), err error) {
	if c, err = s.get(op, h); err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	if err := s.usableLocked(op, c); err != nil {
		c.mu.Unlock()
		return nil, nil, err
	}
	return c, c.mu.Unlock, nil
}

// usableLocked fails for a deleted or corrupt chunk.
func (s *Store) usableLocked(op string, c *chunk) error {
	if c.deleted {
		return errNotExist(op, c.handle)
	}
	if c.corrupt.Load() {
		return errCorrupt(op, c.handle)
	}
	return nil
}

func (s *Store) markCorrupt(c *chunk, err error) {
	if !c.corrupt.Swap(true) {
		s.log.Error("chunk corrupt", "chunk", name(c.handle), "err", err)
	}
}

// Info returns what the store knows of chunk h.
func (s *Store) Info(h chunkfs.Handle) (Info, error) {
	c, err := s.get("info", h)
	if err != nil {
		return Info{}, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.infoLocked(), nil
}

func (c *chunk) infoLocked() Info {
	return Info{Handle: c.handle, Version: c.version, Length: c.length, Corrupt: c.corrupt.Load()}
}

// List returns every chunk held, sorted by handle.
func (s *Store) List() []Info {
	s.mu.Lock()
	cs := make([]*chunk, 0, len(s.chunks))
	for _, c := range s.chunks {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	infos := make([]Info, len(cs))
	for i, c := range cs {
		c.mu.RLock()
		infos[i] = c.infoLocked()
		c.mu.RUnlock()
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Handle < infos[j].Handle })
	return infos
}

// Used returns the bytes of chunk data held.
func (s *Store) Used() int64 {
	var n int64
	for _, in := range s.List() {
		n += in.Length
	}
	return n
}

// Disks returns the distinct file systems holding the data directories
// that have not failed, in the order of the directories: directories on
// one file system give one Disk.
func (s *Store) Disks() ([]Disk, error) {
	var disks []Disk
	seen := make(map[string]bool, len(s.cfg.Dirs))
	s.mu.Lock()
	failed := append([]bool(nil), s.failed...)
	s.mu.Unlock()
	for i, d := range s.cfg.Dirs {
		if failed[i] {
			continue // its space is no use
		}
		disk, err := s.cfg.FS.Space(d)
		if err != nil {
			return nil, err
		}
		if !seen[disk.ID] {
			seen[disk.ID] = true
			disks = append(disks, disk)
		}
	}
	return disks, nil
}

// Delete removes chunk h and its files.
func (s *Store) Delete(h chunkfs.Handle) error {
	c, err := s.get("delete", h)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleted = true
	s.forget(c)
	err1 := s.cfg.FS.Remove(s.path(c, ".meta"))
	err2 := s.cfg.FS.Remove(s.path(c, ".data"))
	for _, err := range []error{err1, err2} {
		switch {
		case err == nil || errors.Is(err, fs.ErrNotExist):
		case isDiskFailure(err):
			// Gone from the store all the same; its files stay on a disk
			// that no longer works.
			s.failDir(c.dir, err)
			return nil
		default:
			return s.diskError("delete", c, err)
		}
	}
	return nil
}

// Sync makes chunk h's data and metadata durable: an fsync of each of its
// files, or one sync of their file system shared with the Syncs of other
// chunks that ask meanwhile (syncGroup).
func (s *Store) Sync(h chunkfs.Handle) error {
	c, unlock, err := s.lockUsable("sync", h)
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.writeMetaLocked(c, false); err != nil {
		return s.failLocked("sync", c, err)
	}
	dir := s.cfg.Dirs[c.dir]
	own := func() error { return s.syncFilesLocked(c) }
	if err := s.syncs[c.dir].join(own, func() error { return s.cfg.FS.SyncFS(dir) }); err != nil {
		return s.failLocked("sync", c, err)
	}
	return nil
}

// syncFilesLocked fsyncs c's data file, then its metadata file.
func (s *Store) syncFilesLocked(c *chunk) error {
	for _, suffix := range []string{".data", ".meta"} {
		f, err := s.cfg.FS.OpenFile(s.path(c, suffix), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Corrupt returns the handles of the chunks marked corrupt.
func (s *Store) Corrupt() []chunkfs.Handle {
	var hs []chunkfs.Handle
	for _, in := range s.List() {
		if in.Corrupt {
			hs = append(hs, in.Handle)
		}
	}
	return hs
}
