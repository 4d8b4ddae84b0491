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

// TestNotedAttr: the attributes a change's answer carries for its
// directory (noteAttr) serve the directory's next Getattr once, within
// AttrTimeout, through changes of a file alone (fileChange); not after
// another change that may alter a directory started (a hidden name's
// removal at release is one), not from a change that overlapped another
// (the master may apply the two in either order), and not with attribute
// caching off.
func TestNotedAttr(t *testing.T) {
	bg := context.Background()
	for _, c := range []struct {
		name    string
		cfg     Config
		overlap bool                      // the change noted starts while another is under way
		after   func(*mount, *clock.Fake) // between the note and the Getattr
		served  bool
	}{
		{"fresh", DefaultConfig(), false, nil, true},
		{"after a file's change", DefaultConfig(), false, func(m *mount, _ *clock.Fake) {
			_, end := m.fileChange(bg) // a push, a setattr of a file
			end()
		}, true},
		{"after AttrTimeout", DefaultConfig(), false, func(m *mount, clk *clock.Fake) { clk.Advance(m.cfg.AttrTimeout) }, false},
		{"after another change started", DefaultConfig(), false, func(m *mount, _ *clock.Fake) {
			_, end := m.mutation(bg) // maybe of this directory
			end()
		}, false},
		{"after a hidden name's removal", DefaultConfig(), false, func(m *mount, _ *clock.Fake) {
			_, end := m.dirChange() // as unhide removes one
			end()
		}, false},
		{"from an overlapping change", DefaultConfig(), true, nil, false},
		{"with caching off", DefaultConfig().NoCache(), false, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1e9, 0))
			m := newMount(newMemBackend(), c.cfg, slog.New(slog.DiscardHandler), clk)
			dir := m.newNode()
			fi := &chunkfs.FileInfo{FileName: "d"}
			endFirst := func() {}
			if c.overlap {
				_, endFirst, _ = m.mutationAt(bg)
			}
			_, end, gen := m.mutationAt(bg)
			endFirst()
			m.noteAttr(dir, fi, gen)
			end()
			if c.after != nil {
				c.after(m, clk)
			}
			switch got := m.notedAttr(dir); {
			case c.served && got != fi:
				t.Fatalf("note not served: %v", got)
			case !c.served && got != nil:
				t.Fatal("note served")
			}
			if got := m.notedAttr(dir); got != nil {
				t.Error("a note served twice")
			}
		})
	}
}

// TestDirChangeNumbers: a change that may alter a directory is numbered
// 0 when it starts while another is under way, so it notes nothing;
// ending one twice counts once.
func TestDirChangeNumbers(t *testing.T) {
	m := newMount(newMemBackend(), DefaultConfig(), slog.New(slog.DiscardHandler), clock.NewFake(time.Unix(1e9, 0)))
	first, endFirst := m.dirChange()
	second, endSecond := m.dirChange()
	if first == 0 || second != 0 {
		t.Errorf("numbers %d, then %d while the first was under way; want a number, then 0", first, second)
	}
	endFirst()
	endSecond()
	endSecond()
	third, endThird := m.dirChange()
	fourth, endFourth := m.dirChange()
	if third == 0 || fourth != 0 {
		t.Errorf("after the others ended (one twice): %d, then %d while it was under way; want a number, then 0", third, fourth)
	}
	endThird()
	endFourth()
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

// TestChangesAskNoStatOfTheDirectory: through a mount, the kernel looks
// at the directory after every create, mkdir, symlink and unlink (its
// permission check for the next, default_permissions); the attributes
// the change's answer carried answer it, across a file's writes and
// close, so a row of changes costs the directory (for unlinks: the
// backend) next to no Stat, and its times still move with them. With
// caching off each look asks.
func TestChangesAskNoStatOfTheDirectory(t *testing.T) {
	const names = 40
	for _, op := range []struct {
		name    string
		before  func(p string) error // on each name, before the row
		change  func(p string) error
		left    int  // entries after the row
		perStat int  // cached: at most one Stat per perStat changes
		every   bool // count every Stat, not only the directory's
	}{
		{"create", nil, func(p string) error { return os.WriteFile(p, []byte("data"), 0o644) }, names, 8, false},
		{"mkdir", nil, func(p string) error { return os.Mkdir(p, 0o755) }, names, 8, false},
		{"symlink", nil, func(p string) error { return os.Symlink("target", p) }, names, 8, false},
		{"unlink", func(p string) error { return os.WriteFile(p, nil, 0o644) }, os.Remove, 0, 4, true},
	} {
		for _, c := range []struct {
			name   string
			cfg    Config
			cached bool
		}{{"cached", DefaultConfig(), true}, {"nocache", DefaultConfig().NoCache(), false}} {
			t.Run(op.name+"/"+c.name, func(t *testing.T) {
				b := newMemBackend()
				mnt := mountT(t, b, c.cfg)
				dir := filepath.Join(mnt, "d")
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				name := func(i int) string { return filepath.Join(dir, fmt.Sprint("n", i)) }
				for i := range names {
					if op.before == nil {
						break
					}
					if err := op.before(name(i)); err != nil {
						t.Fatal(err)
					}
				}
				before, err := os.Stat(dir)
				if err != nil {
					t.Fatal(err)
				}
				stats := func() int64 {
					if op.every {
						return b.stats.Load()
					}
					return b.statsOf("/d")
				}
				start := stats()
				for i := range names {
					if err := op.change(name(i)); err != nil {
						t.Fatal(err)
					}
				}
				n := stats() - start
				if c.cached && n > int64(names/op.perStat) {
					t.Errorf("%d Stat calls for %d %ss, want at most %d", n, names, op.name, names/op.perStat)
				}
				if !c.cached && n < names/2 {
					t.Errorf("%d Stat calls for %d %ss with caching off: the kernel's looks were answered from notes", n, names, op.name)
				}
				after, err := os.Stat(dir)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := b.Stat(context.Background(), chunkfs.Root, "/d")
				if !after.ModTime().Equal(want.MTime) || after.ModTime().Before(before.ModTime()) {
					t.Errorf("directory mtime %v after the %ss, the backend's %v (before %v)", after.ModTime(), op.name, want.MTime, before.ModTime())
				}
				if ents, _ := os.ReadDir(dir); len(ents) != op.left {
					t.Errorf("%d entries after the %ss, want %d", len(ents), op.name, op.left)
				}
			})
		}
	}
}
