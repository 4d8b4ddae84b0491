package fusefs

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
)

// gatedBackend holds every write of its files until open is closed. Its
// files carry an mtime to their next write, as the client's do
// (modTimeCarrier).
type gatedBackend struct {
	*memBackend
	open chan struct{}
}

func newGatedBackend() *gatedBackend {
	return &gatedBackend{memBackend: newMemBackend(), open: make(chan struct{})}
}

func (b *gatedBackend) Create(ctx context.Context, c chunkfs.Caller, p string, perm fs.FileMode, excl, trunc bool, at time.Time) (File, *chunkfs.FileInfo, *chunkfs.FileInfo, error) {
	f, fi, parent, err := b.memBackend.Create(ctx, c, p, perm, excl, trunc, at)
	if err != nil {
		return nil, nil, nil, err
	}
	return &gatedFile{File: f, b: b, path: p}, fi, parent, nil
}

type gatedFile struct {
	File
	b    *gatedBackend
	path string

	mu    sync.Mutex // guards mtime
	mtime time.Time  // for the next write to set; zero: none
}

func (f *gatedFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	select {
	case <-f.b.open:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	n, err := f.File.WriteAt(ctx, p, off)
	f.mu.Lock()
	t := f.mtime
	f.mtime = time.Time{}
	f.mu.Unlock()
	if err == nil && !t.IsZero() {
		_, err = f.b.SetAttr(ctx, chunkfs.Root, f.path, SetAttr{MTime: &t})
	}
	return n, err
}

func (f *gatedFile) ModTimeAtCommit(t time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	pending := !f.mtime.IsZero()
	f.mtime = t
	return pending
}

func asyncConfig() Config {
	cfg := DefaultConfig()
	cfg.AsyncClose = 4
	cfg.AttrTimeout, cfg.EntryTimeout = 0, 0 // every stat asks the mount
	return cfg
}

// clusterLength is the length the backend holds for p.
func clusterLength(t *testing.T, b Backend, p string) int64 {
	t.Helper()
	fi, err := b.Stat(t.Context(), chunkfs.Root, p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Length
}

// TestAsyncCloseReturnsBeforeThePush: with --async-close, close(2) of a
// written file returns while its push cannot proceed; a stat of the file
// meanwhile waits for the push and sees its size.
func TestAsyncCloseReturnsBeforeThePush(t *testing.T) {
	b := newGatedBackend()
	mnt := mountT(t, b, asyncConfig())
	data := bytes.Repeat([]byte("a"), 4096)
	if err := os.WriteFile(filepath.Join(mnt, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := clusterLength(t, b, "/f"); n != 0 {
		t.Fatalf("the cluster holds %d bytes before the push could run", n)
	}
	type result struct {
		fi  os.FileInfo
		err error
	}
	stat := make(chan result, 1)
	go func() {
		fi, err := os.Stat(filepath.Join(mnt, "f"))
		stat <- result{fi, err}
	}()
	close(b.open)
	r := <-stat
	if r.err != nil || r.fi.Size() != int64(len(data)) {
		t.Fatalf("stat during the push: %v, %v", r.fi, r.err)
	}
	if n := clusterLength(t, b, "/f"); n != int64(len(data)) {
		t.Fatalf("the cluster holds %d bytes after the stat that waited for the push", n)
	}
}

// TestAsyncCloseErrorReachesNextFsyncAndClose: a push that fails after
// close(2) returned is returned by the file's next fsync, or its next
// close, once.
func TestAsyncCloseErrorReachesNextFsyncAndClose(t *testing.T) {
	b := newGatedBackend()
	close(b.open)
	b.failWrites = chunkfs.E("write", "", chunkfs.KindNoSpace, "disk full")
	mnt := mountT(t, b, asyncConfig())
	for _, how := range []string{"fsync", "close"} {
		p := filepath.Join(mnt, how)
		if err := os.WriteFile(p, []byte("lost"), 0o644); err != nil {
			t.Fatalf("%s: close returned the push's error itself: %v", how, err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if how == "fsync" {
			if err := f.Sync(); !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("fsync after a failed push: %v, want ENOSPC", err)
			}
			if err := f.Sync(); err != nil {
				t.Errorf("second fsync: %v, want the failure returned once", err)
			}
		}
		err = f.Close()
		if how == "close" && !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("close after a failed push: %v, want ENOSPC", err)
		}
		if how == "fsync" && err != nil {
			t.Errorf("close after fsync returned the failure: %v", err)
		}
	}
}

// TestAsyncCloseErrorOnceWhileUnreleased: a failed push is returned once
// even while the handle that wrote it is not released yet (the kernel
// sends the release after close returns, or a dup keeps the open file):
// the second fsync through another handle pushed that handle's buffer
// again and returned its first error again (a CI flake when the release
// came late).
func TestAsyncCloseErrorOnceWhileUnreleased(t *testing.T) {
	b := newGatedBackend()
	close(b.open)
	b.failWrites = chunkfs.E("write", "", chunkfs.KindNoSpace, "disk full")
	mnt := mountT(t, b, asyncConfig())
	p := filepath.Join(mnt, "f")
	f1, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f1.Write([]byte("lost")); err != nil {
		t.Fatal(err)
	}
	held, err := syscall.Dup(int(f1.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(held)
	if err := f1.Close(); err != nil {
		t.Fatalf("close returned the push's error itself: %v", err)
	}
	f2, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if err := f2.Sync(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("fsync after a failed push: %v, want ENOSPC", err)
	}
	if err := f2.Sync(); err != nil {
		t.Errorf("second fsync with the writer unreleased: %v, want the failure returned once", err)
	}
}

// TestAsyncCloseWrittenByUnmount: unmount returns only once the pushes
// still in flight after their close are done.
func TestAsyncCloseWrittenByUnmount(t *testing.T) {
	needFuse(t)
	b := newGatedBackend()
	dir := t.TempDir()
	srv, err := Mount(context.Background(), dir, b, asyncConfig(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("u"), 10000)
	if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o644); err != nil {
		unmountT(t, srv)
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Unmount() }()
	if n := clusterLength(t, b, "/f"); n != 0 {
		t.Errorf("the cluster holds %d bytes before the push could run", n)
	}
	close(b.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	if n := clusterLength(t, b, "/f"); n != int64(len(data)) {
		t.Fatalf("after unmount the cluster holds %d bytes, want %d", n, len(data))
	}
}
