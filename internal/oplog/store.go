package oplog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"
)

// The log store. Raft's entries and its term and vote live in a
// write-ahead log (hashicorp/raft-wal) in DIR/wal: segment files that an
// append batch extends with one fsync, and a small BoltDB file that
// changes only when a segment fills or the term or vote changes. Logs of
// chunkfs before it were one BoltDB file, DIR/raft.db, whose commit is two
// fsyncs; openStore moves such a log into DIR/wal once and leaves
// DIR/raft.db as a marker that an older chunkfs refuses to open (the old
// file itself is kept as DIR/raft.db.migrated).
const (
	walDirName  = "wal"
	boltName    = "raft.db"
	migratedExt = ".migrated"
)

// movedMarker heads DIR/raft.db once its log has moved to DIR/wal. It is
// padded to a page so that BoltDB (which an older chunkfs would open it
// with) reads a page and refuses it as an invalid database rather than
// starting a new, empty log beside the snapshots.
var movedMarker = []byte("chunkfs: this master's log moved to wal/ (raft-wal); the old BoltDB log is raft.db.migrated. An older chunkfs cannot read wal/.\n")

const markerSize = 4096

// logStore is what Raft is given: log and stable store in one.
type logStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// openStore opens the log store in dir, moving an old BoltDB log into it
// first.
func openStore(dir string, noSync bool, logger *slog.Logger, out io.Writer) (logStore, error) {
	walDir := filepath.Join(dir, walDirName)
	_, err := os.Stat(walDir)
	if errors.Is(err, os.ErrNotExist) {
		err = newStore(dir, noSync, logger, out)
	}
	if err != nil {
		return nil, fmt.Errorf("oplog: log store: %w", err)
	}
	if err := retireBolt(dir); err != nil {
		return nil, err
	}
	return openWAL(walDir, noSync, out)
}

// newStore makes DIR/wal: the old BoltDB log moved, or an empty one.
func newStore(dir string, noSync bool, logger *slog.Logger, out io.Writer) error {
	bolt := filepath.Join(dir, boltName)
	moved, err := isMarker(bolt)
	switch {
	case moved:
		return fmt.Errorf("%s says the log moved to %s, which is missing: restore %s from a backup", bolt, walDirName, walDirName)
	case err == nil:
		if err := migrateBolt(dir, noSync, out); err != nil {
			return fmt.Errorf("move the log from %s to %s: %w (the old log is unchanged; an older chunkfs still reads it)", boltName, walDirName, err)
		}
		logger.Info("oplog: moved the log from raft.db to wal/; raft.db.migrated is the old copy and may be deleted", "dir", dir)
		return nil
	case errors.Is(err, os.ErrNotExist):
		return os.Mkdir(filepath.Join(dir, walDirName), 0o700)
	default:
		return err
	}
}

// isMarker reports whether the file at path is the moved marker; an error
// when it cannot be read (os.ErrNotExist when absent).
func isMarker(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	head := make([]byte, len(movedMarker))
	if _, err := io.ReadFull(f, head); err != nil {
		return false, nil // shorter than the marker: not it
	}
	return bytes.Equal(head, movedMarker), nil
}

// openWAL opens (or creates) the write-ahead log in dir, which exists.
func openWAL(dir string, noSync bool, out io.Writer) (*walStore, error) {
	var vfs types.VFS = walfs.New()
	if noSync {
		vfs = noSyncFS{vfs}
	}
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(dir,
		raftwal.WithMetaStore(meta),
		raftwal.WithSegmentFiler(segment.NewFiler(dir, vfs)),
		raftwal.WithLogger(hclog.New(&hclog.LoggerOptions{Name: "wal", Level: hclog.Error, Output: out})))
	if err != nil {
		meta.Close()
		return nil, fmt.Errorf("oplog: open log store %s: %w", dir, err)
	}
	return &walStore{WAL: w, meta: meta}, nil
}

// walStore closes the write-ahead log's metadata file too, which
// raftwal.WAL.Close leaves open (and locked, so that a reopen in the same
// process would wait for it forever).
type walStore struct {
	*raftwal.WAL
	meta *metadb.BoltMetaDB
}

func (w *walStore) Close() error {
	return errors.Join(w.WAL.Close(), w.meta.Close())
}

// migrateBolt copies the BoltDB log of dir, entries and term and vote,
// into a new write-ahead log, which becomes DIR/wal only when complete
// (openStore then retires raft.db). A crash leaves either the old log
// alone, with a partial wal.tmp that the next try removes, or a complete
// DIR/wal.
func migrateBolt(dir string, noSync bool, out io.Writer) error {
	old, err := openBoltReadOnly(filepath.Join(dir, boltName))
	if err != nil {
		return err
	}
	defer old.Close()
	tmp := filepath.Join(dir, walDirName+".tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	w, err := openWAL(tmp, noSync, out)
	if err != nil {
		return err
	}
	if err := copyLog(w, old); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, walDirName)); err != nil {
		return err
	}
	return syncDir(dir)
}

// openBoltReadOnly opens an old log without changing it, once it has
// checked that the file has the buckets of one (the store's reads assume
// them).
func openBoltReadOnly(path string) (*raftboltdb.BoltStore, error) {
	opts := &bbolt.Options{ReadOnly: true, Timeout: time.Second}
	db, err := bbolt.Open(path, 0o600, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Base(path), err)
	}
	err = db.View(func(tx *bbolt.Tx) error {
		for _, b := range []string{"logs", "conf"} {
			if tx.Bucket([]byte(b)) == nil {
				return fmt.Errorf("%s is not a Raft log: no %q bucket", filepath.Base(path), b)
			}
		}
		return nil
	})
	if err = errors.Join(err, db.Close()); err != nil {
		return nil, err
	}
	s, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: opts})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Base(path), err)
	}
	return s, nil
}

// stableKeys are the keys Raft keeps in its stable store.
var stableKeys = []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand"}

// copyLog copies src's stable keys and entries into dst.
func copyLog(dst logStore, src *raftboltdb.BoltStore) error {
	for _, k := range stableKeys {
		v, err := src.Get([]byte(k))
		if errors.Is(err, raftboltdb.ErrKeyNotFound) {
			continue // never set
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", k, err)
		}
		if err := dst.Set([]byte(k), v); err != nil {
			return err
		}
	}
	first, err := src.FirstIndex()
	if err != nil {
		return err
	}
	last, err := src.LastIndex()
	if err != nil || last == 0 {
		return err
	}
	const batchBytes = 4 << 20
	var batch []*raft.Log
	size := 0
	for i := first; i <= last; i++ {
		e := new(raft.Log)
		if err := src.GetLog(i, e); err != nil {
			return fmt.Errorf("read entry %d of [%d, %d]: %w", i, first, last, err)
		}
		batch, size = append(batch, e), size+len(e.Data)+len(e.Extensions)+64
		if size >= batchBytes || i == last {
			if err := dst.StoreLogs(batch); err != nil {
				return fmt.Errorf("write entries up to %d: %w", i, err)
			}
			batch, size = batch[:0], 0
		}
	}
	return nil
}

// retireBolt makes raft.db, beside a write-ahead log, the moved marker:
// a raft.db that holds a log (one just moved) is kept as
// raft.db.migrated. An older chunkfs then fails on raft.db instead of
// starting an empty log beside the snapshots and losing the log's tail.
func retireBolt(dir string) error {
	path := filepath.Join(dir, boltName)
	moved, err := isMarker(path)
	switch {
	case moved:
		return nil
	case err == nil:
		if _, err := os.Stat(path + migratedExt); err == nil {
			return fmt.Errorf("oplog: %s holds a log beside %s and %s%s: move one away (the log in %s is the one used)", path, walDirName, boltName, migratedExt, walDirName)
		}
		if err := os.Rename(path, path+migratedExt); err != nil {
			return fmt.Errorf("oplog: keep the old log: %w", err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("oplog: %w", err)
	}
	marker := make([]byte, markerSize)
	copy(marker, movedMarker)
	if err := writeFileSync(path+".tmp", marker); err != nil {
		return fmt.Errorf("oplog: write the moved marker: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("oplog: write the moved marker: %w", err)
	}
	return syncDir(dir)
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}

// noSyncFS is the write-ahead log's file system with fsync skipped
// (Config.NoSync: tests and benchmarks of the CPU path only).
type noSyncFS struct{ types.VFS }

func (n noSyncFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := n.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (n noSyncFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := n.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

type noSyncFile struct{ types.WritableFile }

func (noSyncFile) Sync() error { return nil }
