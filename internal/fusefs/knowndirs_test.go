package fusefs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
)

// TestKnownDirsMade: a directory the mount made answers its misses until
// NegativeTimeout has passed, less the names the mount adds to it; a
// change of names other than an addition forgets it; a timeout of 0
// knows nothing.
func TestKnownDirsMade(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	k := newKnownDirs(clk, time.Second)
	k.made("/d")
	if missing, fetch, _ := k.find("/d", "a"); !missing || fetch {
		t.Fatalf("a name of a directory just made: missing %v, fetch %v", missing, fetch)
	}
	k.adding("/d", "a")
	if missing, _, _ := k.find("/d", "a"); missing {
		t.Error("a name the mount is creating is answered missing")
	}
	if missing, _, _ := k.find("/e", "a"); missing {
		t.Error("a name of a directory never listed is answered missing")
	}
	clk.Advance(time.Second)
	if missing, _, _ := k.find("/d", "b"); missing {
		t.Error("a directory's names answer past NegativeTimeout")
	}
	k.made("/d")
	k.changed()
	if missing, _, _ := k.find("/d", "b"); missing {
		t.Error("a directory's names answer after a remove or rename")
	}
	off := newKnownDirs(clk, 0)
	off.made("/d")
	if missing, _, _ := off.find("/d", "b"); missing {
		t.Error("a name answered missing with NegativeTimeout 0")
	}
}

// TestKnownDirsListed: a burst of misses lists the directory; its names,
// with those the mount began to create while it was listed, answer the
// misses; a listing fetched across a change, or failed, is not kept.
func TestKnownDirsListed(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	k := newKnownDirs(clk, time.Second)
	fetch := func() uint64 {
		t.Helper()
		for i := 1; i <= 2*1024; i++ {
			if missing, f, gen := k.find("/d", "x"); missing {
				t.Fatal("a miss answered before the directory is listed")
			} else if f {
				return gen
			}
		}
		t.Fatal("no listing after many misses")
		return 0
	}
	gen := fetch()
	if _, again, _ := k.find("/d", "x"); again {
		t.Error("a second listing while one is fetched")
	}
	k.adding("/d", "new") // a create sent while the listing is fetched
	k.store("/d", gen, clk.Now(), []string{"a", "b"})
	for name, want := range map[string]bool{"a": false, "b": false, "new": false, "x": true} {
		if got := k.missing("/d", name); got != want {
			t.Errorf("%s: missing %v, want %v", name, got, want)
		}
	}

	k.changed()
	gen = fetch()
	k.changed() // a remove while the listing is fetched
	k.store("/d", gen, clk.Now(), []string{"a"})
	if k.missing("/d", "x") {
		t.Error("a listing fetched across a remove answers")
	}
	gen = fetch()
	k.store("/d", gen, clk.Now(), nil) // the listing failed
	for i := 1; i < 2*lookupBurst; i++ {
		if _, f, _ := k.find("/d", "x"); f {
			t.Fatalf("listed again after %d misses of a failed listing", i)
		}
	}
}

// missCounter counts the Stat calls its backend answers "no such file".
type missCounter struct {
	*memBackend
	misses atomic.Int64
}

func (b *missCounter) Stat(ctx context.Context, c chunkfs.Caller, p string) (*chunkfs.FileInfo, error) {
	fi, err := b.memBackend.Stat(ctx, c, p)
	if chunkfs.KindOf(err) == chunkfs.KindNotExist {
		b.misses.Add(1)
	}
	return fi, err
}

// TestKnownDirsMount: with NegativeTimeout, the look-ups before the
// creates of new names in a directory made through the mount cost the
// master nothing, with --async-create or without; a name another mount
// made meanwhile is missing here for that timeout, as documented; a
// removed name, and after a rename any name, is asked of the master. With the default timeout of 0 every
// such look-up asks the master.
func TestKnownDirsMount(t *testing.T) {
	const n = 20
	for _, c := range []struct {
		name      string
		negative  time.Duration
		async     int
		wantAsked bool
	}{
		{"default", 0, 0, true},
		{"negative-timeout", time.Hour, 0, false},
		{"negative-timeout/async-create", time.Hour, 16, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &missCounter{memBackend: newMemBackend()}
			cfg := DefaultConfig()
			cfg.NegativeTimeout, cfg.AsyncCreate = c.negative, c.async
			mnt := mountT(t, b, cfg)
			dir := filepath.Join(mnt, "d")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			before := b.misses.Load()
			for i := range n {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if asked := b.misses.Load() - before; (asked >= n) != c.wantAsked || (!c.wantAsked && asked != 0) {
				t.Errorf("%d creates of new names: the master answered %d look-ups 'no such file'", n, asked)
			}
			for i := range n {
				if data, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(i))); err != nil || string(data) != "x" {
					t.Fatalf("read %d: %q, %v", i, data, err)
				}
			}
			if c.negative == 0 {
				return
			}
			// Another mount's file, made after this mount made d.
			if _, _, _, err := b.memBackend.Create(context.Background(), chunkfs.Root, "/d/other", 0o644, true, false, time.Time{}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "other")); !os.IsNotExist(err) {
				t.Errorf("another mount's new name within NegativeTimeout: %v, want it missing", err)
			}
			if err := os.Remove(filepath.Join(dir, "0")); err != nil {
				t.Fatal(err)
			}
			before = b.misses.Load()
			if _, err := os.Lstat(filepath.Join(dir, "0")); !os.IsNotExist(err) {
				t.Fatalf("stat of a removed name: %v", err)
			}
			if b.misses.Load() == before {
				t.Error("a look-up of a removed name answered without the master")
			}
			if err := os.Rename(filepath.Join(dir, "1"), filepath.Join(dir, "renamed")); err != nil {
				t.Fatal(err)
			}
			before = b.misses.Load()
			if _, err := os.Lstat(filepath.Join(dir, "absent")); !os.IsNotExist(err) {
				t.Fatalf("stat of a missing name: %v", err)
			}
			if b.misses.Load() == before {
				t.Error("a look-up after a rename answered without the master")
			}
		})
	}
}

// TestAsyncCreateListNames: the names a directory is known by include
// the creates still in flight, which the master's listing lacks.
func TestAsyncCreateListNames(t *testing.T) {
	b := newCreateGate()
	ctx := context.Background()
	if _, _, err := b.Mkdir(ctx, chunkfs.Root, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := asyncCreateConfig()
	a := newCreator(b, cfg, clock.Real{}, slog.New(slog.DiscardHandler), func(string) {}, func(string) {})
	if _, _, _, err := a.Create(ctx, chunkfs.Root, "/d/flying", 0o644, true, false, time.Time{}); err != nil {
		t.Fatal(err)
	}
	names, err := a.listNames(ctx, chunkfs.Root, "/d")
	close(b.open)
	a.drain()
	if err != nil || !slices.Contains(names, "flying") {
		t.Errorf("listNames with a create in flight: %v, %v", names, err)
	}
	if _, err := a.listNames(ctx, chunkfs.Root, "/nowhere"); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("listNames of a missing directory: %v", err)
	}
}
