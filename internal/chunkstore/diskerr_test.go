package chunkstore

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/chunkfs/chunkfs"
)

// failOnce returns a fault that fails the (n+1)-th op on files whose name
// contains part with err, and no other: a disk that fills up fails the
// write that needs new space, not the rewrite of space already held.
func failOnce(op, part string, n int, err error) func(string, string) error {
	var seen atomic.Int64
	return func(o, name string) error {
		if o == op && strings.Contains(name, part) && seen.Add(1) == int64(n+1) {
			return err
		}
		return nil
	}
}

func TestFullDiskIsNotCorruption(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, tt := range []struct {
		name  string
		op    string
		part  string
		after int // ops that pass first
		off   int64
		n     int
	}{
		{"append", "write", ".data", 0, 100000, 1 << 20},
		{"overwrite and extend, first segment", "write", ".data", 0, 90000, 1 << 20},
		{"overwrite and extend, mid-write", "write", ".data", 2, 90000, 1 << 20}, // writeLocked goes by 256 KiB segments
		{"metadata rewrite", "write", ".meta", 0, 90000, 1 << 20},
		{"extending past a gap", "truncate", ".data", 1, 300000, 10},
		{"writing past a gap", "write", ".data", 0, 300000, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemFS(1 << 30)
			s := openStore(t, m, "/d")
			old := randBytes(r, 100000)
			if err := s.Create(1, 1); err != nil {
				t.Fatal(err)
			}
			if err := s.Write(1, 0, old); err != nil {
				t.Fatal(err)
			}
			m.SetFault(failOnce(tt.op, tt.part, tt.after, syscall.ENOSPC))
			if err := s.Write(1, tt.off, randBytes(r, tt.n)); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
				t.Fatalf("write on a full disk: %v, want KindNoSpace", err)
			}
			m.SetFault(nil)
			if in, _ := s.Info(1); in.Corrupt || in.Length != int64(len(old)) {
				t.Fatalf("after a full disk: %+v", in)
			}
			if got := readAll(t, s, 1); !bytes.Equal(got, old) {
				t.Fatal("old contents changed")
			}
			// The replica is whole on reload, and writable once space returns.
			if got := readAll(t, openStore(t, m, "/d"), 1); !bytes.Equal(got, old) {
				t.Fatal("old contents changed after reload")
			}
			if err := s.Write(1, int64(len(old)), []byte("more")); err != nil {
				t.Fatalf("write once space returns: %v", err)
			}
		})
	}
}

func TestFullDiskOnCreateSyncAndVersion(t *testing.T) {
	m := NewMemFS(1 << 30)
	s := openStore(t, m, "/d")
	s.Create(1, 1)
	s.Write(1, 0, []byte("kept"))
	m.SetFault(func(op, name string) error {
		if op == "write" || op == "sync" {
			return syscall.ENOSPC
		}
		return nil
	})
	if err := s.Create(2, 1); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Errorf("create on a full disk: %v", err)
	}
	if err := s.Sync(1); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Errorf("sync on a full disk: %v", err)
	}
	if err := s.SetVersion(1, 2); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Errorf("set version on a full disk: %v", err)
	}
	m.SetFault(nil)
	if _, err := s.Info(2); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Errorf("chunk whose creation failed: %v", err)
	}
	if in, _ := s.Info(1); in.Corrupt || in.Version != 1 {
		t.Errorf("after a full disk: %+v", in)
	}
	if err := s.SetVersion(1, 2); err != nil {
		t.Fatal(err)
	}
	if in, _ := openStore(t, m, "/d").Info(1); in.Corrupt || in.Version != 2 {
		t.Errorf("reloaded: %+v", in)
	}
	for _, f := range files(m) {
		if strings.Contains(f, "0000000000000002") {
			t.Errorf("left behind: %s", f)
		}
	}
}

func TestFailingDirectoryLosesItsReplicas(t *testing.T) {
	m := NewMemFS(1 << 30)
	s := openStore(t, m, "/a", "/b")
	for h := chunkfs.Handle(1); h <= 4; h++ { // 1, 3 in /a; 2, 4 in /b
		if err := s.Create(h, 1); err != nil {
			t.Fatal(err)
		}
		s.Write(h, 0, []byte("data"))
	}
	m.SetFault(func(op, name string) error {
		if strings.HasPrefix(name, "/a/") {
			return syscall.EIO
		}
		return nil
	})
	if err := s.Write(1, 4, []byte("x")); err == nil {
		t.Fatal("write to a failing disk succeeded")
	}
	got := s.Corrupt()
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("corrupt after /a failed: %v, want [1 3]", got)
	}
	if f := s.FailedDirs(); len(f) != 1 || f[0] != "/a" {
		t.Fatalf("failed dirs %v", f)
	}
	// The other directory serves on and takes every new replica.
	if b := readAll(t, s, 2); string(b) != "data" {
		t.Fatalf("replica in /b: %q", b)
	}
	for h := chunkfs.Handle(5); h <= 6; h++ {
		if err := s.Create(h, 1); err != nil {
			t.Fatal(err)
		}
		if c, _ := s.get("", h); c.dir != 1 {
			t.Fatalf("chunk %d created in failed dir", h)
		}
	}
	disks, err := s.Disks()
	if err != nil || len(disks) != 1 {
		t.Fatalf("disks %v, %v", disks, err)
	}
	// The master has the lost replicas deleted: they go, though their
	// files cannot be removed.
	for _, h := range []chunkfs.Handle{1, 3} {
		if err := s.Delete(h); err != nil {
			t.Fatalf("delete from a failed directory: %v", err)
		}
	}
	if got := s.Corrupt(); len(got) != 0 {
		t.Fatalf("corrupt after deleting: %v", got)
	}
	// A read error fails the directory too.
	m2 := NewMemFS(1 << 30)
	s2 := openStore(t, m2, "/a")
	s2.Create(1, 1)
	s2.Write(1, 0, []byte("data"))
	m2.SetFault(failOnce("read", "", 0, syscall.EIO))
	if _, err := s2.Read(1, 0, make([]byte, 4)); err == nil {
		t.Fatal("read from a failing disk succeeded")
	}
	if err := s2.Create(2, 1); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Fatalf("create with every directory failed: %v", err)
	}
}

func TestDuplicateHandleAcrossDirs(t *testing.T) {
	m := NewMemFS(1 << 30)
	a := openStore(t, m, "/a")
	a.Create(1, 1)
	a.Write(1, 0, []byte("old"))
	b := openStore(t, m, "/b")
	b.Create(1, 2)
	b.Write(1, 0, []byte("new"))
	s := openStore(t, m, "/a", "/b")
	if got := readAll(t, s, 1); string(got) != "new" || s.perDir[0]+s.perDir[1] != 1 {
		t.Fatalf("kept %q, per dir %v", got, s.perDir)
	}
	for _, f := range files(m) {
		if strings.HasPrefix(f, "/a/") {
			t.Errorf("older copy left: %s", f)
		}
	}
}

func TestOpenLeavesOutAFailingDirectory(t *testing.T) {
	m := NewMemFS(1 << 30)
	s := openStore(t, m, "/a", "/b")
	s.Create(1, 1) // in /a
	s.Create(2, 1) // in /b
	m.SetFault(func(op, name string) error {
		if strings.HasPrefix(name, "/a") {
			return syscall.EIO
		}
		return nil
	})
	s2 := openStore(t, m, "/a", "/b")
	if f := s2.FailedDirs(); len(f) != 1 || f[0] != "/a" {
		t.Fatalf("failed dirs %v", f)
	}
	if l := s2.List(); len(l) != 1 || l[0].Handle != 2 {
		t.Fatalf("loaded %v", l)
	}
	cfg := DefaultConfig()
	cfg.Dirs, cfg.FS = []string{"/a"}, m
	if _, err := Open(cfg); err == nil {
		t.Fatal("opened with its only directory failing")
	}
}

func TestReserveRefusesNewReplicas(t *testing.T) {
	m := NewMemFS(10 << 20)
	cfg := DefaultConfig()
	cfg.Dirs, cfg.FS, cfg.MaxChunkSize, cfg.Reserve = []string{"/a", "/b"}, m, 4<<20, 4<<20
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for h := chunkfs.Handle(1); h <= 2; h++ {
		if err := s.Create(h, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(h, 0, make([]byte, 3<<20)); err != nil {
			t.Fatal(err)
		}
	}
	// 4 MiB left, less the metadata: no new replica, created or cloned.
	if err := s.Create(3, 1); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Fatalf("create below the reserve: %v, want KindNoSpace", err)
	}
	if _, err := s.BeginIncoming(4, 1); chunkfs.KindOf(err) != chunkfs.KindNoSpace {
		t.Fatalf("clone below the reserve: %v, want KindNoSpace", err)
	}
	// Replicas held go on growing into the reserve.
	if err := s.Write(1, 3<<20, make([]byte, 1<<20)); err != nil {
		t.Fatalf("write to a replica held: %v", err)
	}
	s.Delete(2)
	if err := s.Create(3, 1); err != nil {
		t.Fatalf("create once there is room: %v", err)
	}
}
