package client_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
)

// TestConcurrentMetadataThroughOneClient: 64 goroutines share one client,
// so their calls travel in shared batches; each still gets its own answer
// and its own error. Half the exclusive creates collide, stats of missing
// files fail alone, and a client acting as another user is refused alone.
func TestConcurrentMetadataThroughOneClient(t *testing.T) {
	tc := chunkfstest.NewCluster(t, chunkfstest.Chunkservers(1), chunkfstest.Replication(1))
	c, ctx := tc.Client(), context.Background()
	if err := c.MkdirAll(ctx, "/shared/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	alice, err := tc.NewClientAs(chunkfs.Caller{UID: 1000, GIDs: []uint32{100}})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	const workers, per = 64, 8
	var created, existed, missing atomic.Int64
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				p := fmt.Sprintf("/shared/f%d-%d", g/2, i) // two workers per name
				f, err := c.OpenFile(ctx, p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
				switch {
				case err == nil:
					created.Add(1)
					f.Close()
				case errors.Is(err, fs.ErrExist):
					existed.Add(1)
				default:
					t.Errorf("create %s: %v", p, err)
				}
				q := fmt.Sprintf("/shared/missing%d-%d", g, i)
				if _, err := c.Stat(ctx, q); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("stat %s: %v", q, err)
				} else {
					missing.Add(1)
				}
				if fi, err := c.Stat(ctx, p); err != nil || fi.Name() != fmt.Sprintf("f%d-%d", g/2, i) {
					t.Errorf("stat %s: %v, %v", p, fi, err)
				}
				if g%8 == 0 {
					if _, err := alice.Create(ctx, fmt.Sprintf("/shared/sub/a%d-%d", g, i)); !errors.Is(err, fs.ErrPermission) {
						t.Errorf("alice's create in root's directory: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := int64(workers / 2 * per); created.Load() != n || existed.Load() != n || missing.Load() != workers*per {
		t.Errorf("created %d, existed %d, missing %d", created.Load(), existed.Load(), missing.Load())
	}
	entries, err := c.ReadDir(ctx, "/shared")
	if err != nil || len(entries) != workers/2*per+1 {
		t.Errorf("ReadDir: %d entries, %v", len(entries), err)
	}

	// Renames and removals, concurrently, each with its own outcome.
	var removed atomic.Int64
	for g := range workers / 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				p := fmt.Sprintf("/shared/f%d-%d", g, i)
				if i%2 == 0 {
					if err := c.Rename(ctx, p, p+".moved"); err != nil {
						t.Errorf("rename %s: %v", p, err)
					}
					continue
				}
				if err := c.Remove(ctx, p); err != nil {
					t.Errorf("remove %s: %v", p, err)
				}
				if err := c.Remove(ctx, p); errors.Is(err, fs.ErrNotExist) {
					removed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if removed.Load() != workers/2*per/2 {
		t.Errorf("second removals that failed with ErrNotExist: %d", removed.Load())
	}
	entries, err = c.ReadDir(ctx, "/shared")
	if err != nil || len(entries) != workers/2*per/2+1 {
		t.Errorf("ReadDir after: %d entries, %v", len(entries), err)
	}
}

// TestOpenFileParent: a create through OpenFileParent returns its parent
// directory as a stat right after sees it (a mount answers the kernel's
// next look at the directory with it); an open without O_CREATE returns
// none.
func TestOpenFileParent(t *testing.T) {
	tc := chunkfstest.NewCluster(t, chunkfstest.Chunkservers(1), chunkfstest.Replication(1))
	c, ctx := tc.Client(), context.Background()
	if err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, fi, parent, err := c.OpenFileParent(ctx, "/d/new", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, err := c.Stat(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Name() != "new" || parent == nil || parent.Inode != st.Inode || !parent.MTime.Equal(st.MTime) || parent.FileMode != st.FileMode {
		t.Errorf("create: file %v, parent %v; a stat of the directory says %v", fi, parent, st)
	}
	f, _, parent, err = c.OpenFileParent(ctx, "/d/new", os.O_RDONLY, 0, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if parent != nil {
		t.Errorf("open without O_CREATE: parent %v", parent)
	}
}

// TestCreateTime: a file made with CreateOptions.Time has that atime and
// mtime, its ctime the master's; the time does not touch a file that
// exists (even truncated), and a zero time is the master's clock.
func TestCreateTime(t *testing.T) {
	tc := chunkfstest.NewCluster(t, chunkfstest.Chunkservers(1), chunkfstest.Replication(1))
	c, ctx := tc.Client(), context.Background()
	at := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	create := func(p string, flag int, o client.CreateOptions) *chunkfs.FileInfo {
		t.Helper()
		f, _, _, err := c.OpenFileParent(ctx, p, os.O_RDWR|os.O_CREATE|flag, 0o644, o)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		fi, err := c.Stat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	fi := create("/timed", os.O_EXCL, client.CreateOptions{Time: at})
	if !fi.MTime.Equal(at) || !fi.ATime.Equal(at) || !fi.CTime.After(at) {
		t.Errorf("made with %v: mtime %v, atime %v, ctime %v", at, fi.MTime, fi.ATime, fi.CTime)
	}
	before := time.Now().Add(-time.Minute)
	if fi := create("/now", os.O_EXCL, client.CreateOptions{}); fi.MTime.Before(before) {
		t.Errorf("made with no time: mtime %v, want the master's clock", fi.MTime)
	}
	if fi := create("/now", os.O_TRUNC, client.CreateOptions{Time: at}); fi.MTime.Equal(at) || fi.ATime.Equal(at) {
		t.Errorf("an existing file truncated took the create's time: mtime %v, atime %v", fi.MTime, fi.ATime)
	}
}

// TestMkdirSymlinkParent: a mkdir and a symlink return what they made and
// their parent directory as a stat right after describes it; a failed one
// returns an error alone.
func TestMkdirSymlinkParent(t *testing.T) {
	tc := chunkfstest.NewCluster(t, chunkfstest.Chunkservers(1), chunkfstest.Replication(1))
	c, ctx := tc.Client(), context.Background()
	if err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	check := func(how, name string, fi, parent *chunkfs.FileInfo) {
		t.Helper()
		st, err := c.Stat(ctx, "/d")
		if err != nil {
			t.Fatal(err)
		}
		if fi == nil || fi.Name() != name || parent == nil || parent.Inode != st.Inode || !parent.MTime.Equal(st.MTime) || parent.Nlink != st.Nlink {
			t.Errorf("%s: made %v, parent %v; a stat of the directory says %v", how, fi, parent, st)
		}
	}
	fi, parent, err := c.MkdirParent(ctx, "/d/sub", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	check("mkdir", "sub", fi, parent)
	if !fi.IsDir() {
		t.Errorf("mkdir: made %v, not a directory", fi)
	}
	fi, parent, err = c.SymlinkParent(ctx, "sub", "/d/link")
	if err != nil {
		t.Fatal(err)
	}
	check("symlink", "link", fi, parent)
	if fi.Target != "sub" {
		t.Errorf("symlink: made %v, target %q", fi, fi.Target)
	}
	if fi, parent, err := c.MkdirParent(ctx, "/d/sub", 0o755); !errors.Is(err, fs.ErrExist) || fi != nil || parent != nil {
		t.Errorf("mkdir of an existing name: %v, %v, %v", fi, parent, err)
	}
	if fi, parent, err := c.SymlinkParent(ctx, "sub", "/d/link"); !errors.Is(err, fs.ErrExist) || fi != nil || parent != nil {
		t.Errorf("symlink of an existing name: %v, %v, %v", fi, parent, err)
	}
}
