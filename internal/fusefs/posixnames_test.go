package fusefs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/client"
	"golang.org/x/sys/unix"
)

// testModesExact: the caller's umask is applied once (by the kernel), so
// group and other write bits survive when the umask allows them.
func testModesExact(t *testing.T, dir string) {
	for _, c := range []struct {
		umask      int
		file, mdir os.FileMode
	}{{0, 0o777, 0o777}, {0o002, 0o775, 0o775}} {
		old := syscall.Umask(c.umask)
		f, d := filepath.Join(dir, "f"), filepath.Join(dir, "d")
		fh, err := os.OpenFile(f, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o777)
		if err == nil {
			err = fh.Close()
		}
		if err == nil {
			err = os.Mkdir(d, 0o777)
		}
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		for p, want := range map[string]os.FileMode{f: c.file, d: c.mdir} {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
				t.Errorf("umask %03o: %s has mode %v (%v), want %v", c.umask, filepath.Base(p), fi.Mode().Perm(), err, want)
			}
		}
		os.Remove(f)
		os.Remove(d)
	}
}

// testLongRelativePath: a relative path of PATH_MAX-1 bytes given from a
// directory below the mount's root works (the cluster sees the directory's
// path too), and a path the cluster cannot hold is ENAMETOOLONG.
func testLongRelativePath(t *testing.T, dir string) {
	dfd := openDir(t, dir)
	comp := strings.Repeat("d", 254)
	var rel string
	for range 16 {
		rel += comp
		if err := again(func() error { return unix.Mkdirat(dfd, rel, 0o755) }); err != nil {
			t.Fatalf("mkdirat %d bytes: %v", len(rel), err)
		}
		rel += "/"
	}
	rel += strings.Repeat("f", 4095-len(rel))
	fd, err := openat(dfd, rel, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("create a %d-byte relative path: %v", len(rel), err)
	}
	if _, err := unix.Write(fd, []byte("deep")); err != nil {
		t.Errorf("write: %v", err)
	}
	if err := unix.Close(fd); err != nil {
		t.Errorf("close: %v", err)
	}
	var st unix.Stat_t
	if err := again(func() error { return unix.Fstatat(dfd, rel, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil || st.Size != 4 {
		t.Errorf("stat: size %d, %v", st.Size, err)
	}
	if err := again(func() error { return unix.Unlinkat(dfd, rel, 0) }); err != nil {
		t.Errorf("unlink: %v", err)
	}
	// Deeper than the cluster's path limit, one directory at a time.
	fd = dfd
	for depth := 0; ; depth++ {
		err := again(func() error { return unix.Mkdirat(fd, comp, 0o755) })
		if err == unix.ENAMETOOLONG {
			return
		}
		if err != nil && err != unix.EEXIST {
			t.Fatalf("mkdir at depth %d: %v, want success or ENAMETOOLONG", depth, err)
		}
		if depth*255 > 2*maxPathForTest {
			t.Fatalf("mkdir at depth %d still succeeds", depth)
		}
		next, err := openat(fd, comp, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatalf("open at depth %d: %v", depth, err)
		}
		fd = next
		defer unix.Close(next)
	}
}

// again runs a system call until it is not interrupted, as Go's os
// package does: the Go runtime's preemption signals interrupt FUSE
// requests, whose look-ups and opens then answer EINTR.
func again(call func() error) error {
	for {
		if err := call(); err != unix.EINTR {
			return err
		}
	}
}

// openat is unix.Openat, again after EINTR.
func openat(dfd int, p string, flags int, mode uint32) (int, error) {
	var fd int
	err := again(func() error {
		var err error
		fd, err = unix.Openat(dfd, p, flags, mode)
		return err
	})
	return fd, err
}

// maxPathForTest is the cluster's path limit the test expects to reach.
const maxPathForTest = 16 << 10

// testReadDirDots: readdir lists "." and ".." (with the right inode
// numbers) before the entries.
func testReadDirDots(t *testing.T, dir string) {
	writeFile(t, filepath.Join(dir, "f"), nil)
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	ents := rawReadDir(t, dir)
	names := make([]string, 0, len(ents))
	for n := range ents {
		names = append(names, n)
	}
	sort.Strings(names)
	if strings.Join(names, " ") != ". .. d f" {
		t.Fatalf("readdir lists %v, want [. .. d f]", names)
	}
	for name, p := range map[string]string{".": dir, "..": filepath.Dir(dir)} {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if ents[name] != st.Ino {
			t.Errorf("%s has inode %d, want %d", name, ents[name], st.Ino)
		}
	}
}

// rawReadDir lists dir with getdents64 (Go's os and unix helpers drop "."
// and ".."): name → inode number.
func rawReadDir(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	out := map[string]uint64{}
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
		for b := buf[:n]; len(b) > 0; {
			ino := binary.NativeEndian.Uint64(b[0:])
			reclen := binary.NativeEndian.Uint16(b[16:])
			name := b[19:reclen]
			if i := strings.IndexByte(string(name), 0); i >= 0 {
				name = name[:i]
			}
			out[string(name)] = ino
			b = b[reclen:]
		}
	}
}

// testDirNlink: a directory has 2 links plus one per subdirectory, kept
// current by mkdir, rmdir and rename.
func testDirNlink(t *testing.T, dir string) {
	d, e := filepath.Join(dir, "d"), filepath.Join(dir, "e")
	for _, p := range []string{d, e, filepath.Join(d, "a"), filepath.Join(d, "b")} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(d, "f"), nil)
	wantNlink(t, d, 4)
	wantNlink(t, filepath.Join(d, "a"), 2)
	wantNlink(t, filepath.Join(d, "f"), 1)
	wantNlink(t, dir, 4)
	if err := os.Remove(filepath.Join(d, "a")); err != nil {
		t.Fatal(err)
	}
	wantNlink(t, d, 3)
	if err := os.Rename(filepath.Join(d, "b"), filepath.Join(e, "b")); err != nil {
		t.Fatal(err)
	}
	wantNlink(t, d, 2)
	wantNlink(t, e, 3)
	// A listing's attributes (READDIRPLUS) count the same.
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range es {
		fi, err := en.Info()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]uint64{"d": 2, "e": 3}[en.Name()]
		if got := fi.Sys().(*syscall.Stat_t).Nlink; got != want {
			t.Errorf("listed %s has nlink %d, want %d", en.Name(), got, want)
		}
	}
}

func wantNlink(t *testing.T, p string, want uint64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Nlink != want {
		t.Errorf("%s has nlink %d, want %d", filepath.Base(p), st.Nlink, want)
	}
}

// renameat2 is unix.Renameat2 on two paths, again after EINTR.
func renameat2(a, b string, flags uint) error {
	return again(func() error { return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, flags) })
}

// testRenameExchange: RENAME_EXCHANGE swaps two names atomically, of the
// same or different types, keeps open files working under their new
// names, and refuses a missing target or a directory with an entry below
// it.
func testRenameExchange(t *testing.T, dir string) {
	a, b, d := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "d")
	writeFile(t, a, []byte("first"))
	writeFile(t, b, []byte("second"))
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(d, "inner"), []byte("in d"))
	f, err := os.OpenFile(a, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := renameat2(a, b, unix.RENAME_EXCHANGE); err != nil {
		t.Fatalf("exchange a and b: %v", err)
	}
	if ga, gb := readFile(t, a), readFile(t, b); string(ga) != "second" || string(gb) != "first" {
		t.Errorf("after the exchange a holds %q and b %q, want second and first", ga, gb)
	}
	// The open file, once a, is b now.
	checkThrough(t, f, []byte("first"))
	dropCaches(t)
	if got := readFile(t, b); string(got) != "first and after" {
		t.Errorf("b holds %q, want %q", got, "first and after")
	}
	if err := renameat2(a, d, unix.RENAME_EXCHANGE); err != nil {
		t.Fatalf("exchange a file and a directory: %v", err)
	}
	if fi, err := os.Stat(a); err != nil || !fi.IsDir() {
		t.Errorf("a after the exchange with d: %v, %v; want a directory", fi, err)
	}
	if got := readFile(t, filepath.Join(a, "inner")); string(got) != "in d" {
		t.Errorf("a/inner holds %q", got)
	}
	if got := readFile(t, d); string(got) != "second" {
		t.Errorf("d holds %q, want second", got)
	}
	wantNlink(t, dir, 3)
	wantErrno(t, "exchange with a missing target", renameat2(b, filepath.Join(dir, "missing"), unix.RENAME_EXCHANGE), syscall.ENOENT)
	wantErrno(t, "exchange a directory with its entry", renameat2(a, filepath.Join(a, "inner"), unix.RENAME_EXCHANGE), syscall.EINVAL)
	wantErrno(t, "exchange an entry with its directory", renameat2(filepath.Join(a, "inner"), a, unix.RENAME_EXCHANGE), syscall.EINVAL)
}

// testRenameNoReplace: RENAME_NOREPLACE moves to a free name and refuses
// an existing one, leaving both files as they were.
func testRenameNoReplace(t *testing.T, dir string) {
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	writeFile(t, a, []byte("a"))
	writeFile(t, b, []byte("b"))
	wantErrno(t, "noreplace over b", renameat2(a, b, unix.RENAME_NOREPLACE), syscall.EEXIST)
	if ga, gb := readFile(t, a), readFile(t, b); string(ga) != "a" || string(gb) != "b" {
		t.Errorf("after a refused rename a holds %q and b %q", ga, gb)
	}
	if err := renameat2(a, c, unix.RENAME_NOREPLACE); err != nil {
		t.Fatalf("noreplace to a free name: %v", err)
	}
	if got := readFile(t, c); string(got) != "a" {
		t.Errorf("c holds %q", got)
	}
}

// testFifoAndSocket: mkfifo and a Unix socket's bind make metadata-only
// inodes of their type and mode, through which the kernel carries data;
// they list, rename and unlink like files.
func testFifoAndSocket(t *testing.T, dir string) {
	fifo := filepath.Join(dir, "fifo")
	if err := again(func() error { return unix.Mkfifo(fifo, 0o640) }); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode() != os.ModeNamedPipe|0o640 {
		t.Errorf("fifo: %v, %v; want a named pipe, mode 0640", fi.Mode(), err)
	}
	fd, err := openat(unix.AT_FDCWD, fifo, unix.O_RDWR|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("open fifo: %v", err)
	}
	buf := make([]byte, 16)
	if _, err := unix.Write(fd, []byte("through")); err != nil {
		t.Errorf("write fifo: %v", err)
	} else if k, err := unix.Read(fd, buf); err != nil || string(buf[:k]) != "through" {
		t.Errorf("read fifo: %q, %v", buf[:k], err)
	}
	unix.Close(fd)
	// sun_path holds 108 bytes: bind through the directory's descriptor.
	dfd := openDir(t, dir)
	sock := fmt.Sprintf("/proc/self/fd/%d/sock", dfd)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen on a socket in the mount: %v", err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(got) != "hello" {
		t.Errorf("read from the socket: %q, %v", got, err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "sock")); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("sock: %v, %v; want a socket", fi.Mode(), err)
	}
	if err := os.Rename(fifo, fifo+"2"); err != nil {
		t.Errorf("rename fifo: %v", err)
	}
	if names := listNames(t, dir); strings.Join(names, " ") != "fifo2 sock" {
		t.Errorf("directory lists %v", names)
	}
	for _, p := range []string{fifo + "2", filepath.Join(dir, "sock")} {
		if err := os.Remove(p); err != nil {
			t.Errorf("remove %s: %v", filepath.Base(p), err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "f2"), 0o600); err != nil {
		t.Errorf("mkfifo f2: %v", err)
	}
	wantErrno(t, "mkfifo over an existing name", syscall.Mkfifo(filepath.Join(dir, "f2"), 0o600), syscall.EEXIST)
}

// testDeviceNodes: mknod of a character or block device makes a
// metadata-only inode of its type, mode and device number; only the
// superuser may make one.
func testDeviceNodes(t *testing.T, dir string) {
	if os.Getuid() != 0 {
		t.Skip("mknod of a device needs root")
	}
	defer syscall.Umask(syscall.Umask(0))
	for _, c := range []struct {
		name string
		mode uint32
		dev  uint64
	}{{"null", unix.S_IFCHR | 0o666, unix.Mkdev(1, 3)}, {"loop", unix.S_IFBLK | 0o660, unix.Mkdev(7, 200)}} {
		p := filepath.Join(dir, c.name)
		if err := again(func() error { return unix.Mknod(p, c.mode, int(c.dev)) }); err != nil {
			t.Fatalf("mknod %s: %v", c.name, err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode != c.mode || st.Rdev != c.dev || st.Size != 0 {
			t.Errorf("%s: mode %o rdev %x size %d, want mode %o rdev %x size 0", c.name, st.Mode, st.Rdev, st.Size, c.mode, c.dev)
		}
	}
	if err := os.Rename(filepath.Join(dir, "null"), filepath.Join(dir, "null2")); err != nil {
		t.Errorf("rename a device node: %v", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	dfd := openDir(t, dir)
	err := asUser(65534, 65534, func() error {
		return again(func() error { return unix.Mknodat(dfd, "mine", unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))) })
	})
	wantErrno(t, "mknod of a device by a user", err, syscall.EPERM)
	for _, name := range []string{"null2", "loop"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Errorf("remove %s: %v", name, err)
		}
	}
}

// TestDeviceNodeNeedsRoot: the master, not only the kernel, refuses a
// device node to an ordinary user (a library client bypasses the kernel).
func TestDeviceNodeNeedsRoot(t *testing.T) {
	tc := newTestCluster(t)
	ctx := context.Background()
	connect := func(caller chunkfs.Caller) *client.Client {
		cc := client.DefaultConfig()
		cc.Master, cc.Caller = tc.MasterAddr(), caller
		c, err := client.New(ctx, cc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	root, user := connect(chunkfs.Root), connect(chunkfs.Caller{UID: 65534, GIDs: []uint32{65534}})
	if err := root.Mkdir(ctx, "/pub", 0o777); err != nil {
		t.Fatal(err)
	}
	if err := root.Chmod(ctx, "/pub", 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := user.Mknod(ctx, "/pub/fifo", fs.ModeNamedPipe|0o600, 0); err != nil {
		t.Fatalf("mknod of a fifo as uid 65534: %v", err)
	}
	_, err := user.Mknod(ctx, "/pub/dev", fs.ModeDevice|fs.ModeCharDevice|0o666, uint32(unix.Mkdev(1, 3)))
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("mknod of a device as uid 65534: %v, want a permission error", err)
	}
	fi, err := root.Mknod(ctx, "/pub/dev", fs.ModeDevice|fs.ModeCharDevice|0o666, uint32(unix.Mkdev(1, 3)))
	if err != nil || fi.Rdev != uint32(unix.Mkdev(1, 3)) || fi.FileMode.Type() != fs.ModeDevice|fs.ModeCharDevice {
		t.Errorf("mknod of a device as root: %+v, %v", fi, err)
	}
}

// testTimesFollowChanges: mtime and ctime change as POSIX (and
// pjdfstest) expect: a write, a truncation, a chmod and changes of a
// directory's entries move them; a chmod leaves mtime alone.
func testTimesFollowChanges(t *testing.T, dir string) {
	f, d := filepath.Join(dir, "f"), filepath.Join(dir, "d")
	writeFile(t, f, []byte("x"))
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	// after runs op and checks which of p's times moved past what they
	// were: mtime is first set in the past, ctime is waited past.
	after := func(what, p string, op func() error, mtime, ctime bool) {
		t.Helper()
		old := []unix.Timespec{{Sec: 1000}, {Sec: 1000}}
		if err := unix.UtimesNano(p, old); err != nil {
			t.Fatal(err)
		}
		before := statT(t, p)
		// Past the ctime, by more than a tick of the kernel's coarse
		// clock (which sets ctime with the write-back cache).
		for time.Since(time.Unix(before.Ctim.Unix())) < 25*time.Millisecond {
			time.Sleep(5 * time.Millisecond)
		}
		if err := op(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		st := statT(t, p)
		if moved := st.Mtim.Sec != 1000 || st.Mtim.Nsec != 0; moved != mtime {
			t.Errorf("%s: mtime of %s moved %v, want %v", what, filepath.Base(p), moved, mtime)
		}
		bc, ac := time.Unix(before.Ctim.Unix()), time.Unix(st.Ctim.Unix())
		if moved := ac.After(bc); moved != ctime {
			t.Errorf("%s: ctime of %s moved %v (%v → %v), want %v", what, filepath.Base(p), moved, bc, ac, ctime)
		}
	}
	after("write", f, func() error {
		h, err := os.OpenFile(f, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := h.WriteAt([]byte("yz"), 1); err != nil {
			h.Close()
			return err
		}
		return h.Close()
	}, true, true)
	after("truncate", f, func() error { return os.Truncate(f, 1) }, true, true)
	after("chmod", f, func() error { return os.Chmod(f, 0o600) }, false, true)
	after("create", d, func() error { return os.WriteFile(filepath.Join(d, "a"), nil, 0o644) }, true, true)
	after("mkdir", d, func() error { return os.Mkdir(filepath.Join(d, "sub"), 0o755) }, true, true)
	after("rename within", d, func() error { return os.Rename(filepath.Join(d, "a"), filepath.Join(d, "b")) }, true, true)
	after("rename out", d, func() error { return os.Rename(filepath.Join(d, "b"), filepath.Join(dir, "b")) }, true, true)
	after("rename in", d, func() error { return os.Rename(filepath.Join(dir, "b"), filepath.Join(d, "c")) }, true, true)
	after("unlink", d, func() error { return os.Remove(filepath.Join(d, "c")) }, true, true)
	after("rmdir", d, func() error { return os.Remove(filepath.Join(d, "sub")) }, true, true)
}
