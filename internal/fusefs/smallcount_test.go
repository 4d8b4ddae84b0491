package fusefs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
	"github.com/chunkfs/chunkfs/internal/cluster"
	"github.com/chunkfs/chunkfs/internal/master"
)

// masterCalls records the calls clients make to a test cluster's master,
// by method (heartbeats and the chunkservers' reports left out).
type masterCalls struct {
	mu    sync.Mutex // guards calls
	calls []string
}

// option makes a cluster's master record its calls in m, with the
// master's default lease (a client caches a lease that outlives its
// margin, as it does in production).
func (m *masterCalls) option() chunkfstest.Option {
	return func(c *cluster.Config) {
		c.Lease = chunkfs.LeaseDuration
		c.Master = func(mc *master.Config) {
			mc.OnCall = func(method, code string, elapsed time.Duration) {
				if strings.Contains(method, "Heartbeat") || strings.Contains(method, "Report") {
					return
				}
				m.mu.Lock()
				m.calls = append(m.calls, method[strings.LastIndexByte(method, '/')+1:])
				m.mu.Unlock()
			}
		}
	}
}

// mark returns how many calls were made so far.
func (m *masterCalls) mark() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.calls)
}

// since returns the calls made after mark returned from.
func (m *masterCalls) since(from int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.calls[from:]...)
}

// TestSmallFileCloseAsksOnce: a 4 KiB file created, written and closed
// through a mount, its release included, costs the master the look-up of
// the name, the create, the write's lease, the commit of its data (which
// carries the kernel's mtime) and one stat of the file after it; the
// kernel also asks for the directory's attributes, which the create
// changed, and the create's answer gives them (noteAttr). By default the kernel's mtime setattr and the close share that
// stat (takeCommitted); with --async-close the setattr is answered
// without one and the background push asks it. With --async-create the
// create's answer is the mount's, and so is the directory's (from its
// last stat: no Stat of it), and the create sets the times answered (a
// SetAttr, and the Stat that describes its result). Every call goes alone
// (no batching), so each is counted.
func TestSmallFileCloseAsksOnce(t *testing.T) {
	for _, async := range []int{0, 8} {
		t.Run(fmt.Sprint("async-close=", async), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.AsyncClose = async
			testSmallFileCalls(t, cfg)
		})
	}
	t.Run("async-create", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.AsyncClose, cfg.AsyncCreate = 8, 8
		testSmallFileCalls(t, cfg)
	})
}

// mountCounted mounts a test cluster whose master records the calls in
// mc, with every call going alone (no batching), so each is counted.
func mountCounted(t *testing.T, cfg Config, mc *masterCalls) (dir string, srv *Server) {
	tc := chunkfstest.NewCluster(t, chunkfstest.ChunkSize(testChunkSize), mc.option())
	needFuse(t)
	cc := client.DefaultConfig()
	cc.Master = tc.MasterAddr()
	cc.MetaBatch = 1
	cc.Logger = testLogger(t)
	b, err := NewClientBackend(t.Context(), cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	dir = t.TempDir()
	srv, err = Mount(context.Background(), dir, b, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return dir, srv
}

func testSmallFileCalls(t *testing.T, cfg Config) {
	var mc masterCalls
	dir, srv := mountCounted(t, cfg, &mc)
	if err := os.WriteFile(filepath.Join(dir, "warm"), []byte("x"), 0o644); err != nil {
		unmountT(t, srv)
		t.Fatal(err)
	}
	// An open waits for the warm file's push, if it runs in the
	// background.
	if f, err := os.Open(filepath.Join(dir, "warm")); err != nil {
		unmountT(t, srv)
		t.Fatal(err)
	} else {
		f.Close()
	}
	const files = 5
	data := bytes.Repeat([]byte("4kib"), 1024)
	from := mc.mark()
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), data, 0o644); err != nil {
			unmountT(t, srv)
			t.Fatal(err)
		}
	}
	unmountT(t, srv) // every release done
	calls := mc.since(from)
	kinds := map[string]int{}
	for _, c := range calls {
		kinds[c]++
	}
	t.Logf("%d files: %v", files, kinds)
	want := map[string]int{"Stat": 2 * files, "Create": files, "PrepareWrite": files, "CommitLength": files}
	perFile := 5
	if cfg.AsyncCreate > 0 {
		want["SetAttr"], want["Stat"] = files, 3*files
		perFile += 2
	}
	for k, n := range kinds {
		if n > want[k] {
			t.Errorf("%d %s calls for %d files, want at most %d", n, k, files, want[k])
		}
	}
	if len(calls) > perFile*files {
		t.Errorf("%d calls for %d files, want at most %d a file", len(calls), files, perFile)
	}
}

// TestMkdirSymlinkAskOnce: a mkdir or a symlink through a mount costs the
// master the look-up of the name and the change itself: its answer
// describes what it made, and the parent just after, which answers the
// kernel's look at the directory before the next one (noteAttr).
func TestMkdirSymlinkAskOnce(t *testing.T) {
	var mc masterCalls
	dir, srv := mountCounted(t, DefaultConfig(), &mc)
	if err := os.Mkdir(filepath.Join(dir, "warm"), 0o755); err != nil {
		unmountT(t, srv)
		t.Fatal(err)
	}
	const names = 5
	from := mc.mark()
	for i := range names {
		if err := os.Mkdir(filepath.Join(dir, fmt.Sprint("d", i)), 0o755); err != nil {
			unmountT(t, srv)
			t.Fatal(err)
		}
		if err := os.Symlink("target", filepath.Join(dir, fmt.Sprint("l", i))); err != nil {
			unmountT(t, srv)
			t.Fatal(err)
		}
	}
	unmountT(t, srv)
	calls := mc.since(from)
	kinds := map[string]int{}
	for _, c := range calls {
		kinds[c]++
	}
	t.Logf("%d mkdirs and %d symlinks: %v", names, names, kinds)
	want := map[string]int{"Stat": 2 * names, "Mkdir": names, "Create": names}
	for k, n := range kinds {
		if n > want[k] {
			t.Errorf("%d %s calls for %d mkdirs and %d symlinks, want at most %d", n, k, names, names, want[k])
		}
	}
}
