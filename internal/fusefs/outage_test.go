package fusefs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
)

// downBackend wraps a Backend with a switch that makes every metadata
// call hang until its context ends, as calls to an unreachable master do.
type downBackend struct {
	Backend
	down atomic.Bool
}

func (b *downBackend) Stat(ctx context.Context, c chunkfs.Caller, p string) (*chunkfs.FileInfo, error) {
	if b.down.Load() {
		<-ctx.Done()
		return nil, chunkfs.E("stat", p, chunkfs.KindUnavailable, ctx.Err().Error())
	}
	return b.Backend.Stat(ctx, c, p)
}

func (b *downBackend) ReadDir(ctx context.Context, c chunkfs.Caller, p string) ([]*chunkfs.FileInfo, error) {
	if b.down.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return b.Backend.ReadDir(ctx, c, p)
}

func TestMountFailsFastWhenClusterUnreachable(t *testing.T) {
	needFuse(t)
	b := &downBackend{Backend: newMemBackend()}
	b.down.Store(true)
	cfg := DefaultConfig()
	cfg.MountTimeout = 100 * time.Millisecond
	_, err := Mount(context.Background(), t.TempDir(), b, cfg, testLogger(t))
	if err == nil {
		t.Fatal("mount of an unreachable cluster succeeded")
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "not reachable") {
		t.Errorf("want a one-line reason, got %q", err)
	}
}

// TestOutageIsEIOAndRecovers: calls during an outage fail with EIO once
// OpTimeout passes, and work again when the cluster is back.
func TestOutageIsEIOAndRecovers(t *testing.T) {
	b := &downBackend{Backend: newMemBackend()}
	cfg := DefaultConfig().NoCache()
	cfg.OpTimeout = 200 * time.Millisecond
	mnt := mountT(t, b, cfg)
	p := filepath.Join(mnt, "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.down.Store(true)
	_, err := os.Stat(p)
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("stat during the outage: %v, want EIO", err)
	}
	_, err = os.ReadDir(mnt)
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("readdir during the outage: %v, want EIO", err)
	}
	b.down.Store(false)
	if _, err := os.Stat(p); err != nil {
		t.Errorf("stat after the outage: %v", err)
	}
}

// TestWriteErrorReachesClose: a push that fails behind the writer's back
// is returned by close(2) and by fsync(2), never lost.
func TestWriteErrorReachesClose(t *testing.T) {
	mb := newMemBackend()
	mnt := mountT(t, mb, DefaultConfig())
	f, err := os.Create(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	mb.mu.Lock()
	mb.failWrites = chunkfs.E("write", "/f", chunkfs.KindNoSpace, "")
	mb.mu.Unlock()
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		t.Fatalf("buffered write: %v", err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("fsync: %v, want ENOSPC", err)
	}
	if err := f.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("close: %v, want ENOSPC", err)
	}
}
