package fusefs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
)

func entriesNamed(names ...string) []*chunkfs.FileInfo {
	var out []*chunkfs.FileInfo
	for i, n := range names {
		out = append(out, &chunkfs.FileInfo{FileName: n, Inode: uint64(10 + i), Length: int64(i)})
	}
	return out
}

// TestListingsBurst: misses below the burst ask the master; the burst's
// last fetches the listing, which then answers the names it holds (and
// only those) until it expires; an expired listing of many entries takes
// a larger burst to fetch again.
func TestListingsBurst(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	l := newListings(clk, time.Second)
	k := listKey{caller: "0:0", dir: "/d"}
	for i := 1; i < lookupBurst; i++ {
		if _, ok, fetch, _ := l.find(k, "a"); ok || fetch {
			t.Fatalf("miss %d: ok %v fetch %v", i, ok, fetch)
		}
	}
	_, _, fetch, gen := l.find(k, "a")
	if !fetch {
		t.Fatal("the burst's last miss does not fetch")
	}
	if _, _, again, _ := l.find(k, "a"); again {
		t.Error("a second fetch while one is in flight")
	}
	var names []string
	for i := range 200 {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	l.store(k, gen, entriesNamed(names...))
	fi, ok, _, _ := l.find(k, "n7")
	if !ok || fi.Inode != 17 {
		t.Fatalf("listed name: %v %v", fi, ok)
	}
	fi.Length = 99 // the caller's copy
	if fi, _, _, _ := l.find(k, "n7"); fi.Length != 7 {
		t.Error("a caller changed the listing's entry")
	}
	if _, ok, fetch, _ := l.find(k, "absent"); ok || fetch {
		t.Error("a name the listing lacks is answered")
	}
	if _, ok, _, _ := l.find(listKey{caller: "1000:1000", dir: "/d"}, "n7"); ok {
		t.Error("another caller is answered from the listing")
	}
	clk.Advance(time.Second)
	if _, ok, _, _ := l.find(k, "n7"); ok {
		t.Error("an expired listing answers")
	}
	for i := 2; i < 200/16; i++ { // 200 entries: the burst is 12
		if _, _, fetch, _ := l.find(k, "n7"); fetch {
			t.Fatalf("fetch after %d misses past the expiry", i)
		}
	}
	if _, _, fetch, _ := l.find(k, "n7"); !fetch {
		t.Error("no fetch after a burst past the expiry")
	}
}

// TestListingsChanged: a change made through the mount drops every
// listing, and a listing fetched while one was made is not kept.
func TestListingsChanged(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	l := newListings(clk, time.Hour)
	k := listKey{caller: "0:0", dir: "/d"}
	fetch := func() uint64 {
		for {
			if _, _, f, gen := l.find(k, "a"); f {
				return gen
			}
		}
	}
	gen := fetch()
	l.store(k, gen, entriesNamed("a"))
	l.changed()
	if _, ok, _, _ := l.find(k, "a"); ok {
		t.Error("a listing answers after a change")
	}
	gen = fetch()
	l.changed() // while the listing is fetched
	l.store(k, gen, entriesNamed("a"))
	if _, ok, _, _ := l.find(k, "a"); ok {
		t.Error("a listing fetched across a change answers")
	}
	gen = fetch()
	l.store(k, gen, nil) // the fetch failed: the burst doubles
	for i := 1; i < 2*lookupBurst; i++ {
		if _, _, f, _ := l.find(k, "a"); f {
			t.Fatalf("fetch again after %d misses of a failed listing", i)
		}
	}
	if _, _, f, _ := l.find(k, "a"); !f {
		t.Error("no fetch after twice the burst")
	}
	off := newListings(clk, 0)
	for range 2 * lookupBurst {
		if _, _, f, _ := off.find(k, "a"); f {
			t.Fatal("a fetch with prefetch off")
		}
	}
}

// lookupCounter counts the Stat calls of paths in /d and the ReadDir
// calls of a backend.
type lookupCounter struct {
	*memBackend
	stats, lists atomic.Int64
}

func (b *lookupCounter) Stat(ctx context.Context, c chunkfs.Caller, p string) (*chunkfs.FileInfo, error) {
	if strings.HasPrefix(p, "/d/") {
		b.stats.Add(1)
	}
	return b.memBackend.Stat(ctx, c, p)
}

func (b *lookupCounter) ReadDir(ctx context.Context, c chunkfs.Caller, p string) ([]*chunkfs.FileInfo, error) {
	b.lists.Add(1)
	return b.memBackend.ReadDir(ctx, c, p)
}

// prefetchDir mounts a counting backend with the kernel looking every
// name up again (no entry timeout; attributes and listings kept an hour)
// and writes n one-byte files, named 0 … n-1, into the directory d.
func prefetchDir(t *testing.T, n int) (b *lookupCounter, dir string) {
	t.Helper()
	b = &lookupCounter{memBackend: newMemBackend()}
	cfg := DefaultConfig()
	cfg.EntryTimeout, cfg.AttrTimeout, cfg.PrefetchTimeout = 0, time.Hour, time.Hour
	dir = filepath.Join(mountT(t, b, cfg), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return b, dir
}

// TestPrefetchMount: with the kernel looking every name up again (no
// entry timeout; the attributes a look-up answers it keeps), stats of
// many names of one directory cost one listing, not a stat each; and
// every change made through the mount is seen by the very next stat.
func TestPrefetchMount(t *testing.T) {
	const n = 100
	b, dir := prefetchDir(t, n)
	stats, lists := b.stats.Load(), b.lists.Load()
	for i := range n {
		if fi, err := os.Lstat(filepath.Join(dir, fmt.Sprint(i))); err != nil || fi.Size() != 1 {
			t.Fatalf("stat %d: %v %v", i, fi, err)
		}
	}
	// Listings of / (for the look-ups of d) and of d; the misses that
	// fetch a listing ask the master, and so may one or two more while it
	// is being fetched (the kernel's look-ups come from several threads).
	if s, l := b.stats.Load()-stats, b.lists.Load()-lists; l != 2 || s > lookupBurst+2 {
		t.Errorf("%d stats: %d backend stats of their names and %d listings", n, s, l)
	}
	name := filepath.Join(dir, "7")
	if err := os.WriteFile(name, []byte("longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(name); err != nil || fi.Size() != 6 {
		t.Errorf("stat after a write through the mount: %v %v", fi, err)
	}
	if err := os.Chmod(name, 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(name); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("stat after a chmod through the mount: %v %v", fi, err)
	}
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(name); !os.IsNotExist(err) {
		t.Errorf("stat after a remove through the mount: %v", err)
	}
	if err := os.Rename(filepath.Join(dir, "8"), name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "8")); !os.IsNotExist(err) {
		t.Errorf("stat of a renamed name: %v", err)
	}
	if fi, err := os.Lstat(name); err != nil || fi.Size() != 1 {
		t.Errorf("stat of a rename's target: %v %v", fi, err)
	}
}

// TestListingsForget: a change of one file forgets its entry and its
// directory's, keeping the rest of every listing; a listing fetched
// across it is not kept.
func TestListingsForget(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	l := newListings(clk, time.Hour)
	fetch := func(k listKey) uint64 {
		for {
			if _, _, f, gen := l.find(k, "?"); f {
				return gen
			}
		}
	}
	root, d := listKey{caller: "0:0", dir: "/"}, listKey{caller: "0:0", dir: "/d"}
	l.store(root, fetch(root), entriesNamed("d", "e"))
	l.store(d, fetch(d), entriesNamed("a", "b"))
	other := listKey{caller: "1000:1000", dir: "/d"}
	gen := fetch(other)
	l.forget("/d/a")
	l.store(other, gen, entriesNamed("a", "b")) // fetched across the change
	for _, c := range []struct {
		k    listKey
		name string
		want bool
	}{{d, "a", false}, {d, "b", true}, {root, "d", false}, {root, "e", true}, {other, "b", false}} {
		if _, ok, _, _ := l.find(c.k, c.name); ok != c.want {
			t.Errorf("%s in %s: answered %v, want %v", c.name, c.k.dir, ok, c.want)
		}
	}
}

// TestPrefetchRemoveKeepsListing: removing files one by one keeps the
// listing that answers look-ups of the others (mdtest's remove phase):
// the look-up before each unlink costs the master nothing.
func TestPrefetchRemoveKeepsListing(t *testing.T) {
	const n = 64
	b, dir := prefetchDir(t, n)
	stats := b.stats.Load() // the listing is fetched among the removes
	for i := range n {
		if err := os.Remove(filepath.Join(dir, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if s := b.stats.Load() - stats; s > lookupBurst+2 {
		t.Errorf("%d removes asked the master %d look-ups", n, s)
	}
	if _, err := os.Lstat(filepath.Join(dir, "0")); !os.IsNotExist(err) {
		t.Errorf("stat of a removed name: %v", err)
	}
}
