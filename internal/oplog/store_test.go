package oplog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// writeBoltLog writes a log as chunkfs did before the write-ahead log: a
// lone voter on a BoltDB store in dir/raft.db, each command its own entry,
// with a checkpoint after the first snapshotAfter commands. It returns the
// commands.
func writeBoltLog(t *testing.T, dir string, n, snapshotAfter int) []string {
	t.Helper()
	cfg := DefaultConfig(dir)
	cfg.Logger = slog.New(slog.DiscardHandler)
	l := &Log{cfg: cfg}
	out := &slogWriter{log: cfg.Logger}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltName)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStore(dir, cfg.RetainSnapshots, out)
	if err != nil {
		t.Fatal(err)
	}
	addr, trans := raft.NewInmemTransport(raft.ServerAddress(cfg.NodeID))
	rc := l.raftConfig(out)
	if err := raft.BootstrapCluster(rc, store, store, snaps, trans, l.initialConfiguration(addr)); err != nil {
		t.Fatal(err)
	}
	fsm := &fsmAdapter{fsm: &listFSM{}, applied: &l.applied, moved: func() {}}
	r, err := raft.NewRaft(rc, fsm, store, store, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown()
	for deadline := time.Now().Add(10 * time.Second); r.State() != raft.Leader; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the old log's node never led")
		}
	}
	var cmds []string
	for i := range n {
		c := fmt.Sprint("old-", i)
		if err := r.Apply(encodeBatch([]request{{cmds: [][]byte{[]byte(c)}, size: len(c)}}), 10*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
		if i+1 == snapshotAfter {
			if err := r.Snapshot().Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	return cmds
}

func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenMovesBoltLog: a master upgraded from the BoltDB log store keeps
// every entry (checkpoint and tail), its term, and goes on from there; an
// older chunkfs then refuses the directory instead of starting empty.
func TestOpenMovesBoltLog(t *testing.T) {
	dir := t.TempDir()
	want := writeBoltLog(t, dir, 30, 10)
	old := fileBytes(t, filepath.Join(dir, boltName))

	fsm := &listFSM{}
	l := open(t, dir, fsm)
	if got := fsm.list(); !slices.Equal(got, want) {
		t.Fatalf("after the move: %q, want %q", got, want)
	}
	term, err := l.store.GetUint64([]byte("CurrentTerm"))
	if err != nil || term == 0 {
		t.Errorf("CurrentTerm after the move = %d, %v", term, err)
	}
	if _, _, err := l.Apply(context.Background(), []byte("new")); err != nil {
		t.Fatal(err)
	}
	want = append(want, "new")
	l.Close()

	if !bytes.Equal(fileBytes(t, filepath.Join(dir, boltName+migratedExt)), old) {
		t.Error("raft.db.migrated is not the old log")
	}
	if m, err := isMarker(filepath.Join(dir, boltName)); !m || err != nil {
		t.Errorf("raft.db is not the moved marker (%v)", err)
	}
	if _, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltName)}); err == nil {
		t.Error("an older chunkfs opens the moved marker as a log")
	}
	if _, err := os.Stat(filepath.Join(dir, walDirName+".tmp")); err == nil {
		t.Error("wal.tmp left behind")
	}

	fsm2 := &listFSM{}
	l = open(t, dir, fsm2)
	defer l.Close()
	if got := fsm2.list(); !slices.Equal(got, want) {
		t.Fatalf("after a restart: %q, want %q", got, want)
	}
}

// TestOpenFinishesInterruptedMove: a crash in the move leaves either a
// partial wal.tmp (the move starts again from the old log) or a complete
// wal/ beside the old raft.db (wal/ is the log: entries logged after the
// move are not lost to a second move).
func TestOpenFinishesInterruptedMove(t *testing.T) {
	dir := t.TempDir()
	want := writeBoltLog(t, dir, 5, 0)
	tmp := filepath.Join(dir, walDirName+".tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "wal-meta.db"), []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	fsm := &listFSM{}
	l := open(t, dir, fsm)
	if got := fsm.list(); !slices.Equal(got, want) {
		t.Fatalf("after a torn wal.tmp: %q, want %q", got, want)
	}
	l.Apply(context.Background(), []byte("after-move"))
	want = append(want, "after-move")
	l.Close()

	// The crash between wal/ and the marker: raft.db is the old log again.
	if err := os.Rename(filepath.Join(dir, boltName+migratedExt), filepath.Join(dir, boltName)); err != nil {
		t.Fatal(err)
	}
	fsm2 := &listFSM{}
	l = open(t, dir, fsm2)
	defer l.Close()
	if got := fsm2.list(); !slices.Equal(got, want) {
		t.Fatalf("after a crash before the marker: %q, want %q", got, want)
	}
	if m, _ := isMarker(filepath.Join(dir, boltName)); !m {
		t.Error("raft.db not retired")
	}
}

// TestOpenRefusesUnreadableLogs: a raft.db that is not a log, or a marker
// whose wal/ is gone, fails Open with one line saying what to do, and
// nothing is changed.
func TestOpenRefusesUnreadableLogs(t *testing.T) {
	emptyBolt := filepath.Join(t.TempDir(), "empty.db")
	db, err := bbolt.Open(emptyBolt, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	cases := []struct {
		name, content, want string
	}{
		{"corrupt raft.db", strings.Repeat("not a bolt file ", 512), "the old log is unchanged"},
		{"bolt file without a log", string(fileBytes(t, emptyBolt)), "not a Raft log"},
		{"marker without wal", string(movedMarker), "restore wal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, boltName)
			if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig(dir)
			cfg.Logger = slog.New(slog.DiscardHandler)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := Open(ctx, cfg, &listFSM{})
			if err == nil {
				l.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line with %q", err, c.want)
			}
			if string(fileBytes(t, path)) != c.content {
				t.Error("raft.db changed")
			}
			if _, err := os.Stat(filepath.Join(dir, walDirName)); err == nil {
				t.Error("wal/ created")
			}
		})
	}
}

// TestNewLogWritesMarker: a new log is a write-ahead log from the start,
// with the marker an older chunkfs refuses.
func TestNewLogWritesMarker(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, &listFSM{})
	l.Close()
	if m, err := isMarker(filepath.Join(dir, boltName)); !m || err != nil {
		t.Errorf("no moved marker in a new log (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, boltName+migratedExt)); err == nil {
		t.Error("raft.db.migrated in a new log")
	}
	if !Exists(dir) {
		t.Error("Exists")
	}
}

// TestCloseReleasesFiles: Close releases every file of the store, so that
// a process can reopen its log (a master restarted in place) as often as
// it likes.
func TestCloseReleasesFiles(t *testing.T) {
	dir := t.TempDir()
	fds := func() int {
		e, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd")
		}
		return len(e)
	}
	l := open(t, dir, &listFSM{})
	l.Apply(context.Background(), []byte("x"))
	l.Close()
	before := fds()
	for range 5 {
		l := open(t, dir, &listFSM{})
		l.Apply(context.Background(), []byte("x"))
		l.Close()
	}
	if after := fds(); after > before+2 {
		t.Errorf("%d open files after 5 reopens, %d before", after, before)
	}
}

var _ io.Closer = (*walStore)(nil)
