package chunkstore

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chunkfs/chunkfs"
)

// waitingFor waits until n callers wait for g's next round.
func waitingFor(g *syncGroup, n int) {
	for {
		g.mu.Lock()
		k := g.next
		g.mu.Unlock()
		if k == n {
			return
		}
		runtime.Gosched()
	}
}

// runningRound waits until a round of g is under way.
func runningRound(g *syncGroup) {
	for {
		g.mu.Lock()
		running := g.running
		g.mu.Unlock()
		if running {
			return
		}
		runtime.Gosched()
	}
}

// TestSyncGroupShares: a caller alone runs its own sync; the callers that
// ask while it runs share one sync of all; when that fails, each runs its
// own, whose error it returns.
func TestSyncGroupShares(t *testing.T) {
	for _, c := range []struct {
		name     string
		allErr   error
		ownErr   error
		wantOwns int64
	}{
		{"shared", nil, nil, 1},
		{"shared failed", errors.New("syncfs: EIO"), nil, 4},
		{"shared and own failed", errors.New("syncfs: EIO"), errors.New("fsync: EIO"), 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newSyncGroup()
			var owns, alls atomic.Int64
			release := make(chan struct{})
			first := make(chan error, 1)
			go func() {
				first <- g.join(func() error { owns.Add(1); <-release; return nil }, nil)
			}()
			runningRound(g)
			const others = 3
			var wg sync.WaitGroup
			errs := make([]error, others)
			for i := range others {
				wg.Go(func() {
					errs[i] = g.join(func() error { owns.Add(1); return c.ownErr },
						func() error { alls.Add(1); return c.allErr })
				})
			}
			waitingFor(g, others)
			close(release)
			if err := <-first; err != nil {
				t.Fatalf("the caller alone: %v", err)
			}
			wg.Wait()
			if alls.Load() != 1 || owns.Load() != c.wantOwns {
				t.Errorf("%d shared syncs and %d own, want 1 and %d", alls.Load(), owns.Load(), c.wantOwns)
			}
			for i, err := range errs {
				if err != c.ownErr {
					t.Errorf("caller %d: %v, want %v", i, err, c.ownErr)
				}
			}
		})
	}
}

// TestSyncsShareOneFileSystemSync: Syncs of two chunks that ask while
// another Sync of their directory runs make one sync of the file system
// between them, no fsync of their files, and their data survives a crash.
func TestSyncsShareOneFileSystemSync(t *testing.T) {
	m := NewMemFS(1 << 30)
	s := openStore(t, m, "/d")
	for h := range chunkfs.Handle(2) {
		if err := s.Create(h+1, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(h+1, 0, []byte(fmt.Sprint("data of ", h+1))); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var synced []string
	m.SetFault(func(op, name string) error {
		if op == "sync" {
			mu.Lock()
			synced = append(synced, name)
			mu.Unlock()
		}
		return nil
	})
	g := s.syncs[0]
	release := make(chan struct{})
	go g.join(func() error { <-release; return nil }, nil) // another chunk's Sync, under way
	runningRound(g)
	var wg sync.WaitGroup
	for h := range chunkfs.Handle(2) {
		wg.Go(func() {
			if err := s.Sync(h + 1); err != nil {
				t.Errorf("sync %d: %v", h+1, err)
			}
		})
	}
	waitingFor(g, 2)
	close(release)
	wg.Wait()
	if len(synced) != 1 || synced[0] != "/d" {
		t.Errorf("two Syncs waiting together synced %q, want one sync of /d", synced)
	}
	m.SetFault(nil)
	m.Crash(0, 0)
	s = openStore(t, m, "/d")
	for h := range chunkfs.Handle(2) {
		if got, want := string(readAll(t, s, h+1)), fmt.Sprint("data of ", h+1); got != want {
			t.Errorf("chunk %d after a crash: %q, want %q", h+1, got, want)
		}
	}
}
