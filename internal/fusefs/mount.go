// Package fusefs is the FUSE mount of chunkfs (`chunkfs mount`): a POSIX
// view of a cluster, built on go-fuse's node API, and the only importer of
// go-fuse.
//
// Nodes are named by path; every operation is a call to a Backend (the
// client library, through NewClientBackend) acting as the calling process's
// uid and groups, bounded by Config.OpTimeout. Errors become errnos in one
// table (errno.go). Consistency is close-to-open: close pushes what an open
// file wrote, and open asks the cluster for the file's size and mtime.
//
// The cache layers mirror GlusterFS's performance translators, each a
// Config field: attribute and entry timeouts and readdir-primed lookups
// (md-cache, stat-prefetch), read-ahead, write-behind, the kernel page
// cache kept across opens of an unchanged file (io-cache) and small files
// read whole on open (quick-read), plus the kernel's write-back cache
// (with close-to-open kept by per-version FUSE generations, writeback.go)
// and a block cache in the mount's memory (blockcache.go).
// docs/architecture.md (§7, "The mount and its caches") weighs each one's
// consistency cost.
//
// Mount returns a Server once the kernel serves the mount; it serves
// until Unmount (or `chunkfs umount`), and Wait returns when it has
// stopped.
package fusefs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Server is a live mount.
type Server struct {
	dir string
	srv *fuse.Server
	log *slog.Logger
	m   *mount
}

// Mount checks that the cluster answers, mounts it on dir and returns once
// the kernel serves the mount. An unreachable cluster fails within
// cfg.MountTimeout with a one-line reason.
func Mount(ctx context.Context, dir string, b Backend, cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	root, err := rootInfo(ctx, b, cfg)
	if err != nil {
		return nil, err
	}
	m := newMount(b, cfg, log, clock.Real{})
	opts := options(cfg, log)
	opts.RootStableAttr = &gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: root.Inode}
	m.root = m.newNode()
	srv, err := mountFS(dir, m.root, opts, cfg.Ops) // observe.go
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	if cfg.WritebackCache && cfg.DirtyLimit > 0 {
		if err := raiseDirtyLimit(dir, cfg.DirtyLimit); err != nil {
			log.Warn("dirty limit not raised; writes are throttled to the mount's speed after a few MiB", "err", err)
		}
	}
	log.Info("mounted", "dir", dir)
	return &Server{dir: dir, srv: srv, log: log, m: m}, nil
}

// raiseDirtyLimit lets the kernel hold up to limit bytes of dirty pages of
// the mount at dir. FUSE marks its mounts' writeback "strict" with a share
// of 1 % of the dirty memory, which throttles a writer to the daemon's
// speed after a few MiB; Linux 6.2 and later let root change both through
// the mount's bdi in sysfs. The system-wide limits (vm.dirty_ratio) still
// bound the total.
func raiseDirtyLimit(dir string, limit int64) error {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return err
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^0xfff
	minor := dev&0xff | (dev>>12)&^0xff
	bdi := fmt.Sprintf("/sys/class/bdi/%d:%d/", major, minor)
	for _, w := range []struct{ file, value string }{
		{"max_bytes", strconv.FormatInt(limit, 10)},
		{"strict_limit", "0"},
	} {
		if err := os.WriteFile(bdi+w.file, []byte(w.value), 0); err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return fmt.Errorf("%s%s: only root may change it", bdi, w.file)
			}
			return err
		}
	}
	return nil
}

// rootInfo asks the cluster for its root within cfg.MountTimeout.
func rootInfo(ctx context.Context, b Backend, cfg Config) (*chunkfs.FileInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.MountTimeout)
	defer cancel()
	self := chunkfs.Caller{UID: uint32(os.Getuid()), GIDs: []uint32{uint32(os.Getgid())}}
	fi, err := b.Stat(ctx, self, "/")
	if err != nil {
		return nil, fmt.Errorf("cluster not reachable: %w", err)
	}
	return fi, nil
}

// options turns cfg into go-fuse's options.
func options(cfg Config, log *slog.Logger) *gofs.Options {
	o := &gofs.Options{
		EntryTimeout:    &cfg.EntryTimeout,
		AttrTimeout:     &cfg.AttrTimeout,
		NegativeTimeout: &cfg.NegativeTimeout,
		NullPermissions: true, // mode 0000 stays 0000
	}
	o.MountOptions = fuse.MountOptions{
		AllowOther: cfg.AllowOther,
		// The kernel checks permissions from the attributes, as a local
		// file system does, including the sticky bit and chown rules.
		Options:  []string{"default_permissions"},
		FsName:   cfg.FsName,
		Name:     "chunkfs",
		MaxWrite: cfg.MaxWrite,
		// security.capability is asked for before writes (to drop file
		// capabilities); go-fuse answers it "none" without a round trip
		// to the master. Capabilities are not kept, as on a nosuid mount.
		IgnoreSecurityLabels: true,
		// With io-cache the mount decides when pages go (at an open that
		// sees a new version), not the kernel on every mtime it notices.
		ExplicitDataCacheControl: cfg.KeepCache,
		MaxBackground:            64,   // room for the kernel's write-back and read-ahead requests
		EnableLocks:              true, // fcntl and flock locks hold across mounts (locks.go)
		Debug:                    cfg.Debug,
		Logger:                   slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if cfg.WritebackCache {
		o.MountOptions.ExtraCapabilities |= fuse.CAP_WRITEBACK_CACHE
	}
	return o
}

// Dir returns the mount point.
func (s *Server) Dir() string { return s.dir }

// Wait blocks until the mount is unmounted.
func (s *Server) Wait() {
	s.srv.Wait()
	s.m.closer.drain()  // pushes still in flight after their close
	s.m.creates.drain() // creates still in flight (of files with no push)
	s.m.locks.close()   // the mount's file locks go with it
}

// Unmount unmounts; it fails (EBUSY) while files are open on the mount.
func (s *Server) Unmount() error {
	if err := s.srv.Unmount(); err != nil {
		return fmt.Errorf("unmount %s: %w", s.dir, err)
	}
	s.m.closer.drain()
	s.m.creates.drain()
	s.m.locks.close()
	s.log.Info("unmounted", "dir", s.dir)
	return nil
}

// Unmount unmounts whatever FUSE file system is mounted on dir, as
// `chunkfs umount` does; lazy detaches it even while it is busy.
func Unmount(dir string, lazy bool) error {
	args := []string{"-u", dir}
	if lazy {
		args = []string{"-u", "-z", dir}
	}
	out, err := exec.Command("fusermount3", args...).CombinedOutput()
	if err != nil {
		if len(out) > 0 {
			return fmt.Errorf("unmount %s: %s", dir, firstLine(out))
		}
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

func firstLine(b []byte) string {
	for i, c := range b {
		if c == '\n' {
			return string(b[:i])
		}
	}
	return string(b)
}
