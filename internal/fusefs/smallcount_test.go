package fusefs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/internal/cluster"
	"github.com/chunkfs/chunkfs/internal/master"
)

// masterCalls records the calls clients make to a test cluster's master,
// by method (heartbeats and chunkservers' reports left out).
type masterCalls struct {
	mu    sync.Mutex // guards calls
	calls []string
}

func (m *masterCalls) option() chunkfstest.Option {
	return func(c *cluster.Config) {
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

// since returns the calls made after the first n.
func (m *masterCalls) since(n int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.calls[n:]...)
}

func (m *masterCalls) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.calls)
}

// TestSmallFileCloseAsksOnce: a 4 KiB file created, written and closed
// through a mount in the default mode costs the master a bounded number
// of calls.
func TestSmallFileCloseAsksOnce(t *testing.T) {
	var mc masterCalls
	tc := chunkfstest.NewCluster(t, chunkfstest.ChunkSize(testChunkSize), mc.option())
	needFuse(t)
	mnt := mountCluster(t, tc, DefaultConfig())
	dir := subdir(t, mnt)
	if _, err := os.Stat(dir); err != nil { // the directory's attributes, cached
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("4kib"), 1024)
	for i := range 3 {
		before := mc.count()
		name := filepath.Join(dir, "f"+string(rune('a'+i)))
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		t.Logf("calls: %v", mc.since(before))
	}
}
