package fusefs

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"golang.org/x/sys/unix"
)

// countingBackend counts the calls that cross to the cluster.
type countingBackend struct {
	Backend
	stats, lists, reads, writes atomic.Int64
}

func (b *countingBackend) Stat(ctx context.Context, c chunkfs.Caller, p string) (*chunkfs.FileInfo, error) {
	b.stats.Add(1)
	return b.Backend.Stat(ctx, c, p)
}

func (b *countingBackend) ReadDir(ctx context.Context, c chunkfs.Caller, p string) ([]*chunkfs.FileInfo, error) {
	b.lists.Add(1)
	return b.Backend.ReadDir(ctx, c, p)
}

func (b *countingBackend) Open(ctx context.Context, c chunkfs.Caller, p string, write bool) (File, *chunkfs.FileInfo, error) {
	f, fi, err := b.Backend.Open(ctx, c, p, write)
	if err != nil {
		return nil, nil, err
	}
	return &countingFile{File: f, b: b}, fi, nil
}

func (b *countingBackend) Create(ctx context.Context, c chunkfs.Caller, p string, perm os.FileMode, excl, trunc bool, at time.Time) (File, *chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	f, fi, parent, err := b.Backend.Create(ctx, c, p, perm, excl, trunc, at)
	if err != nil {
		return nil, nil, nil, err
	}
	return &countingFile{File: f, b: b}, fi, parent, nil
}

type countingFile struct {
	File
	b *countingBackend
}

func (f *countingFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.b.reads.Add(1)
	return f.File.ReadAt(ctx, p, off)
}

func (f *countingFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	f.b.writes.Add(1)
	return f.File.WriteAt(ctx, p, off)
}

func readAll(t *testing.T, p string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCacheLayers checks what each layer saves, by counting calls to the
// backend: quick-read and io-cache, read-ahead, write-behind and
// stat-prefetch, then the same with --no-cache.
func TestCacheLayers(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		on   bool
	}{{"cached", longCache(), true}, {"nocache", DefaultConfig().NoCache(), false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := &countingBackend{Backend: newMemBackend()}
			mnt := mountT(t, b, tc.cfg)
			small, big := filepath.Join(mnt, "small"), filepath.Join(mnt, "big")
			// Written behind the mount's back, so no page is cached yet.
			sf, _, _, err := b.Backend.Create(context.Background(), chunkfs.Root, "/small", 0o644, true, false, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			sf.WriteAt(context.Background(), bytes.Repeat([]byte("s"), 40<<10), 0)
			bigData := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
			b.writes.Store(0)
			writeFile(t, big, bigData)
			if w := b.writes.Load(); tc.on && w > 4 {
				t.Errorf("write-behind: 8 MiB took %d writes to the cluster", w)
			}

			b.reads.Store(0)
			readAll(t, small)
			if r := b.reads.Load(); r != 1 && tc.on {
				t.Errorf("quick-read: %d reads for a small file, want 1", r)
			}
			b.reads.Store(0)
			readAll(t, small)
			if r := b.reads.Load(); tc.on && r != 0 {
				t.Errorf("io-cache: reopening an unchanged file read %d times, want 0", r)
			}
			if r := b.reads.Load(); !tc.on && r == 0 {
				t.Error("no-cache: reopening read nothing from the cluster")
			}

			if err := os.Truncate(big, int64(len(bigData))); err != nil { // new mtime
				t.Fatal(err)
			}
			// The kernel may keep the pages the writer left if its
			// release has not reached the mount yet (an open on the
			// mount that still has the file open shares them); drop
			// them so that this read goes to the mount either way.
			dropPageCache(t, big)
			b.reads.Store(0)
			if got := readAll(t, big); !bytes.Equal(got, bigData) {
				t.Fatal("big file differs")
			}
			// 128 KiB kernel reads would be 64; windows of 4 MiB make 2,
			// a few more when the kernel's reads arrive out of order.
			if r := b.reads.Load(); tc.on && r > 12 {
				t.Errorf("read-ahead: 8 MiB took %d reads from the cluster", r)
			}

			// The page cache dropped (as fio does before each job): the
			// block cache answers a reread.
			dropPageCache(t, big)
			b.reads.Store(0)
			if got := readAll(t, big); !bytes.Equal(got, bigData) {
				t.Fatal("big file differs after the page cache was dropped")
			}
			if r := b.reads.Load(); tc.on && r != 0 {
				t.Errorf("block cache: reread after the page cache was dropped took %d reads, want 0", r)
			}
			if r := b.reads.Load(); !tc.on && r == 0 {
				t.Error("no-cache: reread after dropping the page cache read nothing from the cluster")
			}

			for i := 0; i < 20; i++ {
				writeFile(t, filepath.Join(mnt, "f"+string(rune('a'+i))), nil)
			}
			b.stats.Store(0)
			es, err := os.ReadDir(mnt)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				if _, err := os.Lstat(filepath.Join(mnt, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
			if s := b.stats.Load(); tc.on && s > 3 {
				t.Errorf("stat-prefetch: ls -l of %d entries took %d stats", len(es), s)
			}
		})
	}
}

// dropPageCache drops the kernel's cached pages of p.
func dropPageCache(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// longCache is the default configuration with attribute and entry
// timeouts that cannot expire during a slow (race-detector) run.
func longCache() Config {
	c := DefaultConfig()
	c.AttrTimeout, c.EntryTimeout = time.Hour, time.Hour
	return c
}

// TestDirtyLimit: the mount lifts the kernel's strict per-FUSE dirty
// limit to Config.DirtyLimit through its bdi in sysfs (root only).
func TestDirtyLimit(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only root may change a bdi's limits")
	}
	cfg := DefaultConfig()
	cfg.DirtyLimit = 512 << 20
	mnt := mountT(t, newMemBackend(), cfg)
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		t.Fatal(err)
	}
	bdi := filepath.Join("/sys/class/bdi", strconv.Itoa(int(unix.Major(st.Dev)))+":"+strconv.Itoa(int(unix.Minor(st.Dev))))
	if _, err := os.Stat(filepath.Join(bdi, "max_bytes")); err != nil {
		t.Skipf("kernel without per-bdi byte limits: %v", err)
	}
	read := func(name string) int64 {
		b, err := os.ReadFile(filepath.Join(bdi, name))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if s := read("strict_limit"); s != 0 {
		t.Errorf("strict_limit %d, want 0", s)
	}
	// The kernel keeps the limit as a ratio and rounds it.
	if m := read("max_bytes"); m < cfg.DirtyLimit*9/10 || m > cfg.DirtyLimit*11/10 {
		t.Errorf("max_bytes %d, want about %d", m, cfg.DirtyLimit)
	}
}
