package fusefs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
)

// TestNotedAttrServesOnce: the attributes an unlink's answer carries
// serve the directory's next Getattr once, within AttrTimeout, and not
// after another change of the mount started or with attribute caching
// off.
func TestNotedAttrServesOnce(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	m := newMount(newMemBackend(), DefaultConfig(), slog.New(slog.DiscardHandler), clk)
	dir := m.newNode()
	fi := &chunkfs.FileInfo{FileName: "d"}

	_, cancel, gen := m.mutationAt(context.Background())
	cancel()
	m.noteAttr(dir, fi, gen)
	if got := m.notedAttr(dir); got != fi {
		t.Fatalf("fresh note: %v", got)
	}
	if got := m.notedAttr(dir); got != nil {
		t.Error("a note served twice")
	}

	m.noteAttr(dir, fi, gen)
	clk.Advance(m.cfg.AttrTimeout)
	if got := m.notedAttr(dir); got != nil {
		t.Error("a note served after AttrTimeout")
	}

	m.noteAttr(dir, fi, gen)
	_, cancel = m.mutation(context.Background()) // another change, maybe of this directory
	cancel()
	if got := m.notedAttr(dir); got != nil {
		t.Error("a note served after another change started")
	}

	off := newMount(newMemBackend(), DefaultConfig().NoCache(), slog.New(slog.DiscardHandler), clk)
	_, cancel, gen = off.mutationAt(context.Background())
	cancel()
	off.noteAttr(dir, fi, gen)
	if got := off.notedAttr(dir); got != nil {
		t.Error("a note served with attribute caching off")
	}
}

// TestUnlinkAsksNoStatOfTheDirectory: through a mount, the kernel looks
// at the directory after every unlink (default_permissions); the
// attributes the remove returned answer it, so removes cost one call
// each, and the directory's times still move with them.
func TestUnlinkAsksNoStatOfTheDirectory(t *testing.T) {
	const files = 40
	for _, c := range []struct {
		name     string
		cfg      Config
		maxStats int64
	}{
		{"cached", DefaultConfig(), files / 4},
		{"nocache", DefaultConfig().NoCache(), -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newMemBackend()
			mnt := mountT(t, b, c.cfg)
			dir := filepath.Join(mnt, "d")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range files {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			stats := b.stats.Load()
			for i := range files {
				if err := os.Remove(filepath.Join(dir, fmt.Sprint("f", i))); err != nil {
					t.Fatal(err)
				}
			}
			n := b.stats.Load() - stats
			if c.maxStats >= 0 && n > c.maxStats {
				t.Errorf("%d Stat calls for %d unlinks, want at most %d", n, files, c.maxStats)
			}
			if c.maxStats < 0 && n < files/2 {
				t.Errorf("%d Stat calls for %d unlinks with caching off: the kernel's looks were answered from notes", n, files)
			}
			after, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := b.Stat(context.Background(), chunkfs.Root, "/d")
			if !after.ModTime().Equal(want.MTime) || after.ModTime().Before(before.ModTime()) {
				t.Errorf("directory mtime %v after the unlinks, the backend's %v (before %v)", after.ModTime(), want.MTime, before.ModTime())
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("%d entries left", len(ents))
			}
		})
	}
}

// TestUnlinkFailureLeavesNoNote: a remove that fails notes nothing; the
// next look at the directory asks the backend.
func TestUnlinkFailureLeavesNoNote(t *testing.T) {
	b := newMemBackend()
	mnt := mountT(t, b, DefaultConfig())
	if err := os.Remove(filepath.Join(mnt, "missing")); !os.IsNotExist(err) {
		t.Fatalf("remove of a missing name: %v", err)
	}
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "d", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(mnt, "d")); err == nil {
		t.Fatal("removed a directory that is not empty")
	}
	fi, err := os.Stat(filepath.Join(mnt, "d"))
	if err != nil || !fi.IsDir() {
		t.Fatalf("the directory after a failed remove: %v, %v", fi, err)
	}
}

// TestNotedAttrAcrossOtherChanges: a note stands through the changes of a
// file alone (fileChange); a change that started while another that may
// alter a directory was under way notes nothing, for the master may apply
// the two in either order; the removal of a hidden name at release ends
// a note as any change of a directory does.
func TestNotedAttrAcrossOtherChanges(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	m := newMount(newMemBackend(), DefaultConfig(), slog.New(slog.DiscardHandler), clk)
	dir := m.newNode()
	fi := &chunkfs.FileInfo{FileName: "d"}

	_, cancel, gen := m.mutationAt(context.Background())
	cancel()
	m.noteAttr(dir, fi, gen)
	_, cancel = m.fileChange(context.Background()) // a push, a setattr of a file
	cancel()
	if got := m.notedAttr(dir); got != fi {
		t.Errorf("a note after a change of a file alone: %v", got)
	}

	_, cancelFirst, _ := m.mutationAt(context.Background())
	_, cancel, gen = m.mutationAt(context.Background())
	if gen != 0 {
		t.Errorf("a change started while another was under way numbered %d", gen)
	}
	cancelFirst()
	m.noteAttr(dir, fi, gen)
	cancel()
	if got := m.notedAttr(dir); got != nil {
		t.Error("a note kept from a change that overlapped another")
	}
	_, cancel, gen = m.mutationAt(context.Background())
	cancel()
	cancel() // ending twice counts once
	if gen == 0 {
		t.Error("a change after the others ended numbered 0")
	}

	m.noteAttr(dir, fi, gen)
	_, done := m.dirChange() // as unhide removes a hidden name
	done()
	if got := m.notedAttr(dir); got != nil {
		t.Error("a note served after a hidden name's removal")
	}
}

// TestCreateAsksNoStatOfTheDirectory: through a mount, the kernel looks
// at the directory after every create (its permission check for the
// next, default_permissions); the attributes the create returned answer
// it, across the file's writes and close, so the directory costs no
// Stat, and its times still move with the creates.
func TestCreateAsksNoStatOfTheDirectory(t *testing.T) {
	const files = 40
	for _, c := range []struct {
		name     string
		cfg      Config
		maxStats int64
	}{
		{"cached", DefaultConfig(), files / 8},
		{"nocache", DefaultConfig().NoCache(), -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newMemBackend()
			mnt := mountT(t, b, c.cfg)
			dir := filepath.Join(mnt, "d")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			before, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			stats := b.statsOf("/d")
			for i := range files {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), []byte("data"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			n := b.statsOf("/d") - stats
			if c.maxStats >= 0 && n > c.maxStats {
				t.Errorf("%d Stat calls of the directory for %d creates, want at most %d", n, files, c.maxStats)
			}
			if c.maxStats < 0 && n < files/2 {
				t.Errorf("%d Stat calls of the directory for %d creates with caching off: the kernel's looks were answered from notes", n, files)
			}
			after, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := b.Stat(context.Background(), chunkfs.Root, "/d")
			if !after.ModTime().Equal(want.MTime) || after.ModTime().Before(before.ModTime()) {
				t.Errorf("directory mtime %v after the creates, the backend's %v (before %v)", after.ModTime(), want.MTime, before.ModTime())
			}
			if ents, _ := os.ReadDir(dir); len(ents) != files {
				t.Errorf("%d entries, want %d", len(ents), files)
			}
		})
	}
}

// TestMkdirSymlinkAskNoStatOfTheDirectory: mkdirs and symlinks in a row
// note their directory's attributes from their answers, as creates do,
// so the kernel's look at the directory before the next one asks the
// backend nothing; with caching off each look asks.
func TestMkdirSymlinkAskNoStatOfTheDirectory(t *testing.T) {
	const names = 40
	for _, op := range []struct {
		name string
		make func(p string) error
	}{
		{"mkdir", func(p string) error { return os.Mkdir(p, 0o755) }},
		{"symlink", func(p string) error { return os.Symlink("target", p) }},
	} {
		for _, c := range []struct {
			name     string
			cfg      Config
			maxStats int64
		}{
			{"cached", DefaultConfig(), names / 8},
			{"nocache", DefaultConfig().NoCache(), -1},
		} {
			t.Run(op.name+"/"+c.name, func(t *testing.T) {
				b := newMemBackend()
				mnt := mountT(t, b, c.cfg)
				dir := filepath.Join(mnt, "d")
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(dir); err != nil {
					t.Fatal(err)
				}
				stats := b.statsOf("/d")
				for i := range names {
					if err := op.make(filepath.Join(dir, fmt.Sprint("n", i))); err != nil {
						t.Fatal(err)
					}
				}
				n := b.statsOf("/d") - stats
				if c.maxStats >= 0 && n > c.maxStats {
					t.Errorf("%d Stat calls of the directory for %d %ss, want at most %d", n, names, op.name, c.maxStats)
				}
				if c.maxStats < 0 && n < names/2 {
					t.Errorf("%d Stat calls of the directory for %d %ss with caching off: the kernel's looks were answered from notes", n, names, op.name)
				}
				after, err := os.Stat(dir)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := b.Stat(context.Background(), chunkfs.Root, "/d")
				if !after.ModTime().Equal(want.MTime) {
					t.Errorf("directory mtime %v after the %ss, the backend's %v", after.ModTime(), op.name, want.MTime)
				}
				if ents, _ := os.ReadDir(dir); len(ents) != names {
					t.Errorf("%d entries, want %d", len(ents), names)
				}
			})
		}
	}
}
