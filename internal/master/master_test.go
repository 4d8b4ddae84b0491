package master

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

func TestNamespaceOverRPC(t *testing.T) {
	tm := startMaster(t, "", nil)
	mk, err := tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: "/a/b", Mode: 0o777, Parents: true})
	if err != nil || mk.StateId == 0 || !fs.FileMode(mk.Info.Mode).IsDir() {
		t.Fatalf("mkdir: %v %v", mk, err)
	}
	fi := tm.create(alice, "/a/b/f")
	st, err := tm.c.Stat(bg, &pb.StatRequest{Caller: alice, Path: "/a/b/f", MinStateId: mk.StateId})
	if err != nil || st.Info.Inode != fi.Inode || st.StateId <= mk.StateId || st.Info.Uid != 1000 {
		t.Fatalf("stat: %v %v", st, err)
	}
	_, err = tm.c.Stat(bg, &pb.StatRequest{Caller: alice, Path: "/a/nope"})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat of a missing file: %v", err)
	}
	_, err = tm.c.Create(bg, &pb.CreateRequest{Caller: alice, Path: "/a/b/f", Exclusive: true})
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("exclusive create: %v", err)
	}
	_, err = tm.c.Delete(bg, &pb.DeleteRequest{Caller: bob, Path: "/a/b/f"})
	if err != nil {
		t.Errorf("bob deletes in a 0777 dir: %v", err)
	}
	_, err = tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: "/a/../x"})
	var e *chunkfs.Error
	if !errors.As(err, &e) || e.Kind != chunkfs.KindInvalid || e.Path != "/a/../x" {
		t.Errorf("unclean path: %v", err)
	}
	_, err = tm.c.Delete(bg, &pb.DeleteRequest{Caller: root, Path: "/a"})
	if !errors.Is(err, chunkfs.ErrNotEmpty) {
		t.Errorf("delete non-empty: %v", err)
	}
	for i := range 5 {
		tm.create(root, fmt.Sprintf("/a/b/g%d", i))
	}
	ls, err := tm.c.List(bg, &pb.ListRequest{Caller: root, Path: "/a/b", After: "g1", Limit: 2})
	if err != nil || len(ls.Entries) != 2 || ls.Entries[0].Name != "g2" || !ls.More {
		t.Errorf("list: %v %v", ls, err)
	}
	if _, err := tm.c.Rename(bg, &pb.RenameRequest{Caller: root, Src: "/a/b", Dst: "/c"}); err != nil {
		t.Fatal(err)
	}
	mode, mtime := uint32(0o600), int64(12345)
	sa, err := tm.c.SetAttr(bg, &pb.SetAttrRequest{Caller: root, Path: "/c/g0", Mode: &mode, MtimeNs: &mtime})
	if err != nil || sa.Info.Mode != 0o600 || sa.Info.MtimeNs != 12345 {
		t.Errorf("setattr: %v %v", sa, err)
	}
	if _, err := tm.c.Delete(bg, &pb.DeleteRequest{Caller: root, Path: "/a", Recursive: true}); err != nil {
		t.Fatal(err)
	}
	ci, err := tm.c.ClusterInfo(bg, &pb.ClusterInfoRequest{})
	if err != nil || ci.ChunkSize != 1<<20 || ci.DefaultReplication != 3 || ci.Leader != tm.addr {
		t.Errorf("cluster info: %v %v", ci, err)
	}
	if _, err := tm.c.Stat(bg, &pb.StatRequest{Caller: root, Path: "/", MinStateId: 1 << 40}); kindOf(err) != chunkfs.KindUnavailable {
		t.Errorf("read beyond the state ID: %v", err)
	}
}

func TestOpenRefusesBusyOrUnreadableDir(t *testing.T) {
	tm := startMaster(t, "", nil)
	_, err := Open(testConfig(t, tm.cfg.Dir, tm.clock))
	if err == nil || !strings.Contains(err.Error(), "in use by another master") || strings.Contains(err.Error(), "\n") {
		t.Errorf("second Open: %v", err)
	}
	if os.Geteuid() == 0 {
		return // root reads anything
	}
	dir := t.TempDir()
	os.Chmod(dir, 0)
	defer os.Chmod(dir, 0o755)
	if _, err := Open(testConfig(t, dir, tm.clock)); err == nil || !strings.Contains(err.Error(), "cannot") {
		t.Errorf("Open on an unreadable dir: %v", err)
	}
}

func TestRestartKeepsNamespace(t *testing.T) {
	tm := startMaster(t, "", nil)
	for i := range 50 {
		tm.create(root, fmt.Sprintf("/f%02d", i))
	}
	if err := tm.m.Snapshot(); err != nil {
		t.Fatal(err)
	}
	for i := 50; i < 60; i++ {
		tm.create(root, fmt.Sprintf("/f%02d", i))
	}
	id := tm.m.StateID()
	tm.close()
	tm2 := startMaster(t, tm.cfg.Dir, tm.clock)
	if tm2.m.StateID() < id {
		t.Errorf("state ID went back: %d → %d", id, tm2.m.StateID())
	}
	ls, err := tm2.c.List(bg, &pb.ListRequest{Caller: root, Path: "/"})
	if err != nil || len(ls.Entries) != 60 {
		t.Fatalf("after restart: %d entries, %v", len(ls.Entries), err)
	}
}

// TestConcurrentNamespace has many goroutines create, rename and delete in
// the same directories at once; the namespace must stay consistent.
func TestConcurrentNamespace(t *testing.T) {
	tm := startMaster(t, "", nil)
	for d := range 3 {
		if _, err := tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: fmt.Sprintf("/d%d", d), Mode: 0o777}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				p := fmt.Sprintf("/d%d/f%d", (g+i)%3, i%7)
				q := fmt.Sprintf("/d%d/f%d", (g+i+1)%3, (i+3)%7)
				tm.c.Create(bg, &pb.CreateRequest{Caller: root, Path: p, Mode: 0o644})
				tm.c.Rename(bg, &pb.RenameRequest{Caller: root, Src: p, Dst: q})
				if i%5 == 0 {
					tm.c.Rename(bg, &pb.RenameRequest{Caller: root, Src: fmt.Sprintf("/d%d", g%3), Dst: fmt.Sprintf("/d%d/sub", (g+1)%3)})
					tm.c.Rename(bg, &pb.RenameRequest{Caller: root, Src: fmt.Sprintf("/d%d/sub", (g+1)%3), Dst: fmt.Sprintf("/d%d", g%3)})
				}
				tm.c.Delete(bg, &pb.DeleteRequest{Caller: root, Path: q})
				tm.c.Stat(bg, &pb.StatRequest{Caller: root, Path: p})
				tm.c.List(bg, &pb.ListRequest{Caller: root, Path: fmt.Sprintf("/d%d", g%3)})
			}
		}()
	}
	wg.Wait()
	if err := tm.m.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestHostileInput(t *testing.T) {
	tm := startMaster(t, "", nil)
	many := make([]uint32, 1000)
	if _, err := tm.c.Create(bg, &pb.CreateRequest{Caller: &pb.Caller{Gids: many}, Path: "/x"}); kindOf(err) != chunkfs.KindInvalid {
		t.Errorf("too many groups: %v", err)
	}
	if _, err := tm.c.Create(bg, &pb.CreateRequest{Caller: root, Path: "/" + strings.Repeat("x", 300)}); kindOf(err) != chunkfs.KindInvalid {
		t.Errorf("long name: %v", err)
	}
	if _, err := tm.c.PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: root, Path: "/x", Index: -1}); kindOf(err) != chunkfs.KindInvalid {
		t.Errorf("negative index: %v", err)
	}
	if _, err := tm.c.Register(bg, &pb.RegisterRequest{}); kindOf(err) != chunkfs.KindInvalid {
		t.Errorf("empty register: %v", err)
	}
	// No caller: nobody, who may not write in a 0755 directory of root's.
	tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: "/priv", Mode: 0o755})
	if _, err := tm.c.Create(bg, &pb.CreateRequest{Path: "/priv/y"}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("create without a caller: %v", err)
	}
}

func TestValidateConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err == nil {
		t.Error("config without Dir accepted")
	}
	cfg := DefaultConfig()
	cfg.Dir = "/x"
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
	cfg.DeadAfter = cfg.HeartbeatInterval
	if cfg.Validate() == nil {
		t.Error("DeadAfter ≤ HeartbeatInterval accepted")
	}
}
