package fusefs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// asUser runs f on an OS thread acting as uid and gid for file access:
// its file-system ids and supplementary groups are changed with raw
// system calls, which change only the calling thread (Go's own Setuid
// changes every thread), and FUSE requests carry that thread's ids. The
// thread is locked and never unlocked, so it ends with the goroutine.
// Paths must be reached through directory descriptors opened before:
// the test's temporary directories are root's, mode 0700.
func asUser(uid, gid int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			errc <- fmt.Errorf("setgroups: %v", e)
			return
		}
		unix.RawSyscall(unix.SYS_SETFSGID, uintptr(gid), 0, 0)
		unix.RawSyscall(unix.SYS_SETFSUID, uintptr(uid), 0, 0)
		if cur, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); int(cur) != uid {
			errc <- fmt.Errorf("setfsuid(%d) left fsuid %d", uid, cur)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// openDir opens dir for the *at system calls, closed when the test ends.
func openDir(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// testCreateReadOnlyAsUser: a file created without owner write (as git
// writes its objects 0444) keeps what the creating descriptor wrote: the
// access was decided at open. Run as uid 65534 so that the master's
// checks are an ordinary user's.
func testCreateReadOnlyAsUser(t *testing.T, dir string) {
	if os.Getuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	dfd := openDir(t, dir)
	data := []byte("hello\n")
	err := asUser(65534, 65534, func() error {
		fd, err := openat(dfd, "obj", unix.O_CREAT|unix.O_EXCL|unix.O_RDWR, 0o444)
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
		if k, err := unix.Write(fd, data); err != nil || k != len(data) {
			unix.Close(fd)
			return fmt.Errorf("write: %d, %v", k, err)
		}
		if err := again(func() error { return unix.Fsync(fd) }); err != nil {
			unix.Close(fd)
			return fmt.Errorf("fsync: %w", err)
		}
		if err := again(func() error { return unix.Ftruncate(fd, 5) }); err != nil {
			unix.Close(fd)
			return fmt.Errorf("ftruncate: %w", err)
		}
		if err := unix.Close(fd); err != nil {
			return fmt.Errorf("close: %w", err)
		}
		// Access is decided at open: a new open for writing is refused.
		if fd, err := openat(dfd, "obj", unix.O_WRONLY, 0); !errors.Is(err, unix.EACCES) {
			if err == nil {
				unix.Close(fd)
			}
			return fmt.Errorf("reopen for writing: %v, want EACCES", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dropCaches(t)
	if got := readFile(t, filepath.Join(dir, "obj")); !bytes.Equal(got, data[:5]) {
		t.Errorf("obj holds %q, want %q", got, data[:5])
	}
	fi, err := os.Stat(filepath.Join(dir, "obj"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o444 || st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("obj: mode %v uid %d gid %d, want 0444 65534 65534", fi.Mode(), st.Uid, st.Gid)
	}
}

// dropCaches makes the next reads of the mount come from the cluster.
func dropCaches(t *testing.T) {
	t.Helper()
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		t.Logf("drop caches: %v", err)
	}
}

// openRW opens p read-write, creating it, for a test's whole run.
func openRW(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// checkThrough writes more through f after its name went away, reads all
// of it back through f, and syncs and closes f: want is what f held
// before.
func checkThrough(t *testing.T, f *os.File, want []byte) {
	t.Helper()
	more := []byte(" and after")
	if _, err := f.WriteAt(more, int64(len(want))); err != nil {
		t.Fatalf("write after: %v", err)
	}
	want = append(want, more...)
	got := make([]byte, len(want)+10)
	k, err := f.ReadAt(got, 0)
	if k != len(want) || !bytes.Equal(got[:k], want) {
		t.Errorf("read back %q (%v), want %q", got[:k], err, want)
	}
	if err := f.Sync(); err != nil {
		t.Errorf("fsync: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// testUnlinkOpenFile: an open file that is unlinked stays a file, with
// nlink 0, that its descriptor reads and writes until it is closed; then
// nothing of it is left.
func testUnlinkOpenFile(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	f := openRW(t, p)
	data := []byte("before unlink")
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lstat after unlink: %v, want ENOENT", err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatalf("fstat: %v", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || fi.Size() != int64(len(data)) || st.Nlink != 0 {
		t.Errorf("fstat: mode %v size %d nlink %d, want a regular file of %d bytes, nlink 0", fi.Mode(), fi.Size(), st.Nlink, len(data))
	}
	if err := f.Chmod(0o600); err != nil {
		t.Errorf("fchmod: %v", err)
	}
	checkThrough(t, f, data)
	// The release that removes the hidden name follows the close; rmdir
	// waits for it.
	if err := os.Remove(dir); err != nil {
		t.Errorf("rmdir after the last close: %v", err)
	}
}

// waitHiddenGone waits until dir holds no hidden name of a file unlinked
// while open. The kernel sends the release that removes it just after
// the last close(2) returns, so it can outlive the close briefly; the
// bound is far above that, and reaching it fails the test.
func waitHiddenGone(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var hidden []string
		for _, n := range listNames(t, dir) {
			if strings.HasPrefix(n, hiddenPrefix) {
				hidden = append(hidden, n)
			}
		}
		if len(hidden) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("hidden names still in %s after the last close: %v", dir, hidden)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testRenameOverOpenFile: a file replaced by rename keeps working for the
// descriptors that have it open; the name holds the new file.
func testRenameOverOpenFile(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, []byte("new"))
	f := openRW(t, b)
	data := []byte("old contents")
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(data)) || !fi.Mode().IsRegular() {
		t.Errorf("fstat after the rename: %v %v", fi, err)
	}
	checkThrough(t, f, data)
	waitHiddenGone(t, dir)
	if got := readFile(t, b); string(got) != "new" {
		t.Errorf("b holds %q, want %q", got, "new")
	}
	if names := listNames(t, dir); strings.Join(names, " ") != "b" {
		t.Errorf("directory holds %v, want [b]", names)
	}
}

// testRenameOpenFile: a file renamed while open, itself or through its
// directory, is written and read at its new name.
func testRenameOpenFile(t *testing.T, dir string) {
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := openRW(t, filepath.Join(dir, "d", "a"))
	data := []byte("first")
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "d", "a"), filepath.Join(dir, "d", "b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "d"), filepath.Join(dir, "e")); err != nil {
		t.Fatal(err)
	}
	checkThrough(t, f, data)
	dropCaches(t)
	if got := readFile(t, filepath.Join(dir, "e", "b")); string(got) != "first and after" {
		t.Errorf("e/b holds %q, want %q", got, "first and after")
	}
}

func listNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// testRenameWhileWriting: renames of an open file and of its directory,
// and unlinks of other open files, race with writes through the open
// file; every write lands, at the file's last name.
func testRenameWhileWriting(t *testing.T, dir string) {
	if err := os.Mkdir(filepath.Join(dir, "d0"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := openRW(t, filepath.Join(dir, "d0", "f0"))
	const rounds = 20
	block := bytes.Repeat([]byte{'x'}, 64<<10)
	done := make(chan error, 1)
	go func() {
		for i := range rounds * 4 {
			if _, err := f.WriteAt(block, int64(i)*int64(len(block))); err != nil {
				done <- fmt.Errorf("write %d: %w", i, err)
				return
			}
		}
		done <- f.Sync()
	}()
	d, name := "d0", "f0"
	for i := range rounds {
		nd, nn := fmt.Sprintf("d%d", i+1), fmt.Sprintf("f%d", i+1)
		if err := os.Rename(filepath.Join(dir, d, name), filepath.Join(dir, d, nn)); err != nil {
			t.Fatalf("rename the file: %v", err)
		}
		if err := os.Rename(filepath.Join(dir, d), filepath.Join(dir, nd)); err != nil {
			t.Fatalf("rename the directory: %v", err)
		}
		d, name = nd, nn
		g := openRW(t, filepath.Join(dir, d, "other"))
		if err := os.Remove(filepath.Join(dir, d, "other")); err != nil {
			t.Fatalf("unlink an open file: %v", err)
		}
		g.Close()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	dropCaches(t)
	got := readFile(t, filepath.Join(dir, d, name))
	if len(got) != rounds*4*len(block) || bytes.Count(got, []byte{'x'}) != len(got) {
		t.Errorf("%s/%s holds %d bytes (%d x), want %d x", d, name, len(got), bytes.Count(got, []byte{'x'}), rounds*4*len(block))
	}
}
