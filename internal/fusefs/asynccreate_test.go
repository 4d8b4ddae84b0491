package fusefs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
)

// createGate holds every create of its backend until open is closed, and
// then refuses it with refuse, if set.
type createGate struct {
	*memBackend
	open   chan struct{}
	refuse error
}

func newCreateGate() *createGate {
	return &createGate{memBackend: newMemBackend(), open: make(chan struct{})}
}

func (b *createGate) Create(ctx context.Context, c chunkfs.Caller, p string, perm fs.FileMode, excl, trunc bool, at time.Time) (File, *chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	select {
	case <-b.open:
	case <-ctx.Done():
		return nil, nil, nil, ctx.Err()
	}
	if b.refuse != nil {
		return nil, nil, nil, b.refuse
	}
	return b.memBackend.Create(ctx, c, p, perm, excl, trunc, at)
}

func asyncCreateConfig() Config {
	cfg := DefaultConfig()
	cfg.AsyncCreate = 16
	cfg.AttrTimeout, cfg.EntryTimeout = 0, 0 // every stat and look-up asks the mount
	return cfg
}

// backendHas reports whether the backend holds p.
func backendHas(b Backend, p string) bool {
	_, err := b.Stat(context.Background(), chunkfs.Root, p)
	return err == nil
}

// returnsAfter runs f in the background, checks that it has not returned
// while the gate is shut (within a short look), opens the gate and
// returns f's error.
func returnsAfter(t *testing.T, what string, gate chan struct{}, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		t.Errorf("%s returned (%v) before the create it waits for", what, err)
		close(gate)
		return err
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	return <-done
}

// TestAsyncCreateAnswersBeforeTheMaster: with --async-create (and
// --async-close) a file is created, written and closed while the master
// has not made it; this mount's stat of the open file sees it at once with
// its size and mode, and an open, a listing and fsync of the file and of
// its directory wait for the create.
func TestAsyncCreateAnswersBeforeTheMaster(t *testing.T) {
	for _, how := range []string{"open", "fsync", "fsyncdir", "readdir"} {
		t.Run(how, func(t *testing.T) {
			b := newCreateGate()
			cfg := asyncCreateConfig()
			cfg.AsyncClose = 4
			mnt := mountT(t, b, cfg)
			p := filepath.Join(mnt, "f")
			data := bytes.Repeat([]byte("c"), 4096)
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(data); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(p)
			if err != nil || fi.Size() != int64(len(data)) || fi.Mode().Perm() != 0o640 {
				t.Fatalf("stat before the create: %v, %v; want %d bytes, mode 0640", fi, err, len(data))
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if backendHas(b, "/f") {
				t.Fatal("the backend has the file before its create could run")
			}
			var got []byte
			err = returnsAfter(t, how, b.open, func() error {
				switch how {
				case "open":
					got, err = os.ReadFile(p)
					return err
				case "fsync", "fsyncdir":
					name := p
					if how == "fsyncdir" {
						name = mnt
					}
					f, err := os.Open(name)
					if err != nil {
						return err
					}
					defer f.Close()
					return f.Sync()
				default:
					names, err := os.ReadDir(mnt)
					if err == nil && (len(names) != 1 || names[0].Name() != "f") {
						err = fmt.Errorf("listed %v", names)
					}
					return err
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if how == "open" && !bytes.Equal(got, data) {
				t.Fatalf("read %d bytes, want the %d written", len(got), len(data))
			}
			if !backendHas(b, "/f") {
				t.Fatalf("%s returned before the create was done", how)
			}
		})
	}
}

// TestAsyncCreateRefused: a create the master refuses fails the file's
// close (without --async-close) or its fsync (with it) with EIO, and the
// name disappears from the mount.
func TestAsyncCreateRefused(t *testing.T) {
	for _, asyncClose := range []int{0, 4} {
		t.Run(fmt.Sprintf("async-close=%d", asyncClose), func(t *testing.T) {
			b := newCreateGate()
			b.refuse = chunkfs.E("create", "/f", chunkfs.KindNoSpace, "no servers")
			cfg := asyncCreateConfig()
			cfg.AsyncClose = asyncClose
			mnt := mountT(t, b, cfg)
			p := filepath.Join(mnt, "f")
			f := createWritten(t, p, []byte("never stored"))
			close(b.open)
			if asyncClose > 0 {
				if err := f.Sync(); !errors.Is(err, syscall.EIO) {
					t.Errorf("fsync of a refused create: %v, want EIO", err)
				}
				f.Close()
			} else if err := f.Close(); !errors.Is(err, syscall.EIO) {
				t.Errorf("close of a refused create: %v, want EIO", err)
			}
			// The name is dropped just after the failure is returned.
			eventually(t, "the refused name's drop", func() error {
				if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("stat: %v, want ENOENT", err)
				}
				return nil
			})
			if backendHas(b, "/f") {
				t.Fatal("the backend has a refused file")
			}
		})
	}
}

// TestAsyncCreateUnmountWaits: unmount returns only once the creates in
// flight are done, those of files with nothing written too.
func TestAsyncCreateUnmountWaits(t *testing.T) {
	needFuse(t)
	b := newCreateGate()
	dir := t.TempDir()
	srv, err := Mount(context.Background(), dir, b, asyncCreateConfig(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprint("empty", i)))
		if err != nil {
			close(b.open)
			unmountT(t, srv)
			t.Fatal(err)
		}
		f.Close()
	}
	err = returnsAfter(t, "unmount", b.open, srv.Unmount)
	if err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	for i := range 3 {
		if !backendHas(b, fmt.Sprint("/empty", i)) {
			t.Errorf("after unmount the backend lacks /empty%d", i)
		}
	}
}

// TestAsyncCreateCluster: on a real cluster, files created, written and
// closed through a mount with --async-create and --async-close read back
// at once on it; once fsync of their directory returns, another mount
// lists them, and once each file's fsync returns, it reads them whole.
// Each file keeps one inode number on the mount that made it, and the
// mtime that mount answered (the kernel's, carried by the commit).
func TestAsyncCreateCluster(t *testing.T) {
	tc := newTestCluster(t)
	cfg := DefaultConfig()
	cfg.AsyncCreate, cfg.AsyncClose = 64, 16
	a, b := mountCluster(t, tc, cfg), mountCluster(t, tc, DefaultConfig())
	const files = 40
	content := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 1000+i*100) }
	inos := map[uint64]bool{}
	mtimes := make([]time.Time, files)
	for i := range files {
		p := filepath.Join(a, fmt.Sprint("f", i))
		if err := os.WriteFile(p, content(i), 0o644); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Size() != int64(len(content(i))) {
			t.Fatalf("stat on the creating mount: %v, %v", fi, err)
		}
		inos[fi.Sys().(*syscall.Stat_t).Ino] = true
		mtimes[i] = fi.ModTime()
	}
	if len(inos) != files {
		t.Fatalf("%d inode numbers for %d files", len(inos), files)
	}
	for i := range files {
		got, err := os.ReadFile(filepath.Join(a, fmt.Sprint("f", i)))
		if err != nil || !bytes.Equal(got, content(i)) {
			t.Fatalf("read back f%d on the creating mount: %d bytes, %v", i, len(got), err)
		}
	}
	d, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync of the directory: %v", err)
	}
	d.Close()
	names, err := os.ReadDir(b)
	if err != nil || len(names) != files {
		t.Fatalf("the other mount lists %d names (%v), want %d", len(names), err, files)
	}
	for i := range files {
		f, err := os.Open(filepath.Join(a, fmt.Sprint("f", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync f%d: %v", i, err)
		}
		f.Close()
		got, err := os.ReadFile(filepath.Join(b, fmt.Sprint("f", i)))
		if err != nil || !bytes.Equal(got, content(i)) {
			t.Fatalf("the other mount reads f%d: %d bytes, %v", i, len(got), err)
		}
		if fi, err := os.Stat(filepath.Join(b, fmt.Sprint("f", i))); err != nil || !fi.ModTime().Equal(mtimes[i]) {
			t.Errorf("f%d's mtime on the other mount: %v, %v; want %v as the creating mount answered", i, fi.ModTime(), err, mtimes[i])
		}
		fi, err := os.Stat(filepath.Join(a, fmt.Sprint("f", i)))
		if err != nil || !inos[fi.Sys().(*syscall.Stat_t).Ino] {
			t.Fatalf("f%d's inode number changed on the creating mount: %v, %v", i, fi, err)
		}
	}
}

// setAttrCounter counts the SetAttr calls it passes on.
type setAttrCounter struct {
	Backend
	n atomic.Int64
}

func (b *setAttrCounter) SetAttr(ctx context.Context, c chunkfs.Caller, p string, s SetAttr) (*chunkfs.FileInfo, error) {
	b.n.Add(1)
	return b.Backend.SetAttr(ctx, c, p, s)
}

// TestAsyncCreateTimesInTheCreate: the times an asynchronous create
// answered reach the master in the create itself, not by a SetAttr after.
func TestAsyncCreateTimesInTheCreate(t *testing.T) {
	b := &setAttrCounter{Backend: newMemBackend()}
	mnt := mountT(t, b, asyncCreateConfig())
	var answered []time.Time
	for i := range 5 {
		p := filepath.Join(mnt, fmt.Sprint("f", i))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		answered = append(answered, fi.ModTime())
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	d, err := os.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil { // waits for the creates
		t.Fatal(err)
	}
	d.Close()
	if n := b.n.Load(); n != 0 {
		t.Errorf("%d SetAttr calls for 5 creates, want 0", n)
	}
	for i, want := range answered {
		fi, err := b.Backend.Stat(context.Background(), chunkfs.Root, fmt.Sprint("/f", i))
		if err != nil || !fi.MTime.Equal(want) || !fi.ATime.Equal(want) {
			t.Errorf("f%d on the backend: %v, %v; want the mtime and atime answered, %v", i, fi, err, want)
		}
	}
}

// racingBackend runs first before each create it passes on.
type racingBackend struct {
	Backend
	first func(p string)
}

func (b racingBackend) Create(ctx context.Context, c chunkfs.Caller, p string, perm fs.FileMode, excl, trunc bool, at time.Time) (File, *chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	b.first(p)
	return b.Backend.Create(ctx, c, p, perm, excl, trunc, at)
}

// TestAsyncCreateRaceWithAnotherMount: another mount creates the name
// between this mount's look-up and its create reaching the master: the
// master refuses the exclusive create, the file's fsync returns EIO, and
// the name then shows the other mount's file.
func TestAsyncCreateRaceWithAnotherMount(t *testing.T) {
	tc := newTestCluster(t)
	cfg := DefaultConfig()
	cfg.AsyncCreate, cfg.AsyncClose = 64, 16
	cfg.OpTimeout = 20 * time.Second
	b := mountCluster(t, tc, DefaultConfig())
	first := func(p string) {
		if err := os.WriteFile(filepath.Join(b, p), []byte("the other mount's"), 0o644); err != nil {
			t.Error(err)
		}
	}
	a := mountT(t, racingBackend{Backend: clusterBackend(t, tc), first: first}, cfg)
	pa := filepath.Join(a, "x")
	f := createWritten(t, pa, []byte("lost"))
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("fsync of the refused create: %v, want EIO", err)
	}
	f.Close()
	eventually(t, "the other mount's file", func() error {
		if got, err := os.ReadFile(pa); err != nil || string(got) != "the other mount's" {
			return fmt.Errorf("read %q, %v", got, err)
		}
		return nil
	})
}

// TestAsyncCreateAppendLosesRace: another mount makes the name between
// this mount's look-up and its plain O_APPEND create reaching the master:
// the create opens the other mount's file, and the writes the kernel
// placed at the end of the empty file this mount answered land after the
// other mount's data, not over it, in both kernel cache modes; without
// O_APPEND they land where they were written, over it. This mount then
// reads the file as it is.
func TestAsyncCreateAppendLosesRace(t *testing.T) {
	for _, c := range []struct {
		wb     bool
		append int
		want   string
	}{
		{true, os.O_APPEND, "the other mount's;mine,mine again"},
		{false, os.O_APPEND, "the other mount's;mine,mine again"},
		{true, 0, "mine,mine again's;"},
		{false, 0, "mine,mine again's;"},
	} {
		wb := c.wb
		t.Run(fmt.Sprint("writeback=", wb, ",append=", c.append != 0), func(t *testing.T) {
			tc := newTestCluster(t)
			cfg := DefaultConfig()
			cfg.AsyncCreate, cfg.AsyncClose = 64, 16
			cfg.WritebackCache = wb
			cfg.OpTimeout = 20 * time.Second
			b := mountCluster(t, tc, DefaultConfig())
			first := func(p string) {
				if err := os.WriteFile(filepath.Join(b, p), []byte("the other mount's;"), 0o644); err != nil {
					t.Error(err)
				}
			}
			a := mountT(t, racingBackend{Backend: clusterBackend(t, tc), first: first}, cfg)
			f, err := os.OpenFile(filepath.Join(a, "log"), os.O_CREATE|c.append|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"mine,", "mine again"} {
				if _, err := f.WriteString(s); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil {
				t.Fatalf("fsync: %v", err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			want := c.want
			for _, mnt := range []string{b, a} { // a: its caches do not keep the empty file's view
				eventually(t, "both mounts' data", func() error {
					if got, err := os.ReadFile(filepath.Join(mnt, "log")); err != nil || string(got) != want {
						return fmt.Errorf("read %q, %v; want %q", got, err, want)
					}
					return nil
				})
			}
		})
	}
}

// createWritten creates p exclusively and writes data to it.
func createWritten(t *testing.T, p string, data []byte) *os.File {
	t.Helper()
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	return f
}
