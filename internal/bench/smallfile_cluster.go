package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chunkfs/chunkfs/client"
)

// localCluster is what bench smallfile starts when it is given no mount:
// a master, chunkservers and a mount, each a process of the chunkfs
// binary on loopback with plain TCP, so that each can be profiled apart.
type localCluster struct {
	c        cluster // the servers, and their logs
	mount    *proc   // the chunkfs mount process
	mountDir string
	args     []string // the mount's command line
	pprof    map[string]string
	taken    map[string]bool // addresses handed out (freeAddr)
}

// startLocalCluster starts the servers and the mount under work and
// returns once the mount serves and every chunkserver is live.
func startLocalCluster(ctx context.Context, cfg SmallConfig, work string, log *slog.Logger) (*localCluster, error) {
	lc := &localCluster{mountDir: filepath.Join(work, "mnt"), pprof: map[string]string{}, taken: map[string]bool{}}
	addr, err := lc.freeAddr()
	if err != nil {
		return nil, err
	}
	lc.c.master = addr
	master := append([]string{cfg.Binary, "master", "--dir", filepath.Join(work, "master"), "--listen", addr, "--insecure"}, lc.httpArgs(cfg, "master")...)
	if err := lc.c.start("master", "", master, work); err != nil {
		return nil, errors.Join(err, lc.c.stop())
	}
	for i := range cfg.Chunkservers {
		name := fmt.Sprintf("chunkserver%02d", i+1)
		cs, err := lc.freeAddr()
		if err == nil {
			err = lc.c.start(name, "", append([]string{cfg.Binary, "chunkserver", "--dir", filepath.Join(work, name),
				"--listen", cs, "--master", addr, "--insecure"}, lc.httpArgs(cfg, name)...), work)
		}
		if err != nil {
			return nil, errors.Join(err, lc.c.stop())
		}
	}
	if err := lc.awaitServers(ctx, cfg.Chunkservers); err != nil {
		return nil, errors.Join(err, lc.c.stop())
	}
	if err := lc.startMount(ctx, cfg, work); err != nil {
		lc.stop(log)
		return nil, err
	}
	for name, url := range lc.pprof {
		log.Info("smallfile: pprof", "process", name, "url", url)
	}
	return lc, nil
}

// httpArgs gives process name a status server with /debug/pprof on a
// free loopback port, when cfg asks for profiling.
func (lc *localCluster) httpArgs(cfg SmallConfig, name string) []string {
	if !cfg.Pprof {
		return nil
	}
	a, err := lc.freeAddr()
	if err != nil {
		return nil
	}
	lc.pprof[name] = "http://" + a + "/debug/pprof/"
	return []string{"--http", a, "--pprof"}
}

// awaitServers waits until the master sees n live chunkservers.
func (lc *localCluster) awaitServers(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var c *client.Client // connected once the master answers
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for {
		if c == nil {
			c, _ = dialClient(ctx, client.Insecure(), lc.c.master, 0, nil)
		}
		if live, err := liveServers(ctx, c); err == nil && live >= n {
			return nil
		}
		if err := lc.c.failed(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d live chunkservers at %s: %w", n, lc.c.master, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startMount starts `chunkfs mount` and waits until the kernel lists it.
func (lc *localCluster) startMount(ctx context.Context, cfg SmallConfig, work string) error {
	if err := os.MkdirAll(lc.mountDir, 0o755); err != nil {
		return err
	}
	lc.args = append([]string{"mount", "--master", lc.c.master, "--insecure"}, lc.httpArgs(cfg, "mount")...)
	lc.args = append(lc.args, cfg.MountArgs...)
	log, err := os.Create(filepath.Join(work, "mount.log"))
	if err != nil {
		return err
	}
	lc.c.logs = append(lc.c.logs, log)
	argv := append(append([]string{cfg.Binary}, lc.args...), lc.mountDir)
	if lc.mount, err = startIn("mount", "", argv, log, nil, nil); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !strings.HasPrefix(mountFSType(lc.mountDir), "fuse") || !isMountPoint(lc.mountDir) {
		if lc.mount.exited() {
			return fmt.Errorf("chunkfs mount exited early (%v); see %s", lc.mount.err, log.Name())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the mount on %s: %w", lc.mountDir, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// describe is the mount's command line, for the report.
func (lc *localCluster) describe() string {
	return "chunkfs " + strings.Join(lc.args, " ")
}

// stop unmounts (the mount process unmounts on SIGTERM; a mount still
// there then is detached) and stops the servers.
func (lc *localCluster) stop(log *slog.Logger) {
	if lc.mount != nil {
		lc.mount.stop(10 * time.Second)
		if isMountPoint(lc.mountDir) {
			if out, err := exec.Command("fusermount3", "-u", "-z", lc.mountDir).CombinedOutput(); err != nil {
				log.Warn("smallfile: unmount", "dir", lc.mountDir, "err", err, "out", strings.TrimSpace(string(out)))
			}
		}
	}
	if err := lc.c.stop(); err != nil {
		log.Warn("smallfile: stop cluster", "err", err)
	}
}

// freeAddr returns a loopback address free just now that this cluster
// has not handed out yet: a port closed after the check is free again,
// and the kernel may well pick it for the next check too (a chunkserver
// then failed to start on the master's port).
func (lc *localCluster) freeAddr() (string, error) {
	for range 100 {
		a, err := freeLoopback()
		if err != nil {
			return "", err
		}
		if !lc.taken[a] {
			lc.taken[a] = true
			return a, nil
		}
	}
	return "", errors.New("no free loopback port that this cluster has not used")
}

// handedOut holds the addresses freeLoopback returned: the kernel may
// give a port closed a moment ago to the next listener, and two servers
// must not be told the same address.
var handedOut sync.Map

// freeLoopback returns a loopback address with a port free just now, not
// returned before.
func freeLoopback() (string, error) {
	for {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := lis.Addr().String()
		lis.Close()
		if _, dup := handedOut.LoadOrStore(addr, true); !dup {
			return addr, nil
		}
	}
}

// mountEntry returns the mount point and file system type of the mount
// that holds dir, from /proc/self/mountinfo.
func mountEntry(dir string) (point, fstype string) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", ""
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// id parent major:minor root point options... - fstype source super
		fields := strings.Fields(s.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		p := unescapeMount(fields[4])
		if (abs == p || strings.HasPrefix(abs, strings.TrimSuffix(p, "/")+"/")) && len(p) >= len(point) {
			point, fstype = p, fields[sep+1] // the last of equal points is on top
		}
	}
	return point, fstype
}

// unescapeMount undoes mountinfo's octal escapes of spaces and the like.
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func mountFSType(dir string) string { _, t := mountEntry(dir); return t }

func isMountPoint(dir string) bool {
	p, _ := mountEntry(dir)
	abs, _ := filepath.Abs(dir)
	return p == abs
}
