package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func setlk(f *os.File, cmd int, typ int16) error {
	return syscall.FcntlFlock(f.Fd(), cmd, &syscall.Flock_t{Type: typ, Whence: 0, Start: 0, Len: 0})
}

// TestLocksAcrossMounts takes fcntl and flock locks through one mount of
// a cluster and checks that another mount sees them: F_SETLK refused with
// EAGAIN, F_GETLK reporting the holder, F_SETLKW waiting until the
// release, flock and POSIX locks independent, a closed descriptor's flock
// released, and an unmounted mount's locks gone.
func TestLocksAcrossMounts(t *testing.T) {
	tc := newTestCluster(t)
	ma := mountCluster(t, tc, DefaultConfig())
	mb := mountCluster(t, tc, DefaultConfig())
	writeFile(t, filepath.Join(ma, "f"), []byte("data"))
	open := func(dir string) *os.File {
		f, err := os.OpenFile(filepath.Join(dir, "f"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	fa, fb := open(ma), open(mb)
	if err := setlk(fa, syscall.F_SETLK, syscall.F_WRLCK); err != nil {
		t.Fatalf("lock through mount A: %v", err)
	}
	wantErrno(t, "read lock through mount B", setlk(fb, syscall.F_SETLK, syscall.F_RDLCK), syscall.EAGAIN)
	lk := syscall.Flock_t{Type: syscall.F_RDLCK}
	if err := syscall.FcntlFlock(fb.Fd(), syscall.F_GETLK, &lk); err != nil || lk.Type != syscall.F_WRLCK {
		t.Errorf("F_GETLK through B: type %d, %v; want F_WRLCK", lk.Type, err)
	}
	// flock locks are another family: B may take one while A holds a POSIX lock.
	if err := syscall.Flock(int(fb.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock through B: %v", err)
	}
	fa2 := open(ma)
	wantErrno(t, "flock through A while B holds one", syscall.Flock(int(fa2.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)
	// F_SETLKW on B waits for A's release.
	got := make(chan error, 1)
	go func() { got <- setlk(fb, syscall.F_SETLKW, syscall.F_WRLCK) }()
	select {
	case err := <-got:
		t.Fatalf("F_SETLKW returned %v while A holds the lock", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := setlk(fa, syscall.F_SETLK, syscall.F_UNLCK); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("F_SETLKW after the release: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("F_SETLKW still waiting 10 s after the release")
	}
	wantErrno(t, "A's lock while B holds it", setlk(fa, syscall.F_SETLK, syscall.F_RDLCK), syscall.EAGAIN)
	// Closing B's descriptor releases its flock and its POSIX lock (the
	// kernel sends the release after close returns).
	fb.Close()
	eventually(t, "flock after B closed its file", func() error { return syscall.Flock(int(fa2.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) })
	eventually(t, "POSIX lock after B closed its file", func() error { return setlk(fa, syscall.F_SETLK, syscall.F_WRLCK) })
	fc := open(mb)
	fa.Close()
	eventually(t, "lock through B after A closed", func() error { return setlk(fc, syscall.F_SETLK, syscall.F_WRLCK) })
	// Bad requests: a write lock on a read-only descriptor, an unknown type.
	fr, err := os.Open(filepath.Join(ma, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	wantErrno(t, "write lock on a read-only descriptor", setlk(fr, syscall.F_SETLK, syscall.F_WRLCK), syscall.EBADF)
	wantErrno(t, "bad lock type", setlk(fc, syscall.F_SETLK, 9), syscall.EINVAL)
	// An unmounted mount's locks go with it.
	mc := t.TempDir()
	srv, err := Mount(context.Background(), mc, clusterBackend(t, tc), DefaultConfig(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	fd := open(mc)
	fc.Close()
	eventually(t, "lock through C", func() error { return setlk(fd, syscall.F_SETLK, syscall.F_WRLCK) })
	fe := open(mb)
	wantErrno(t, "B while C holds the lock", setlk(fe, syscall.F_SETLK, syscall.F_WRLCK), syscall.EAGAIN)
	fd.Close()
	unmountT(t, srv)
	eventually(t, "lock after C was unmounted", func() error { return setlk(fe, syscall.F_SETLK, syscall.F_WRLCK) })
}

// eventually retries f for up to 5 s until it succeeds.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %v after 5 s", what, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
