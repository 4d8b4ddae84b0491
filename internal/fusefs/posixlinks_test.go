package fusefs

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// statT is lstat(2) of p.
func statT(t *testing.T, p string) syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatalf("lstat %s: %v", p, err)
	}
	return st
}

// wantLinks checks that every path names one inode with nlink names.
func wantLinks(t *testing.T, nlink uint64, paths ...string) {
	t.Helper()
	first := statT(t, paths[0])
	for _, p := range paths {
		if st := statT(t, p); st.Ino != first.Ino || uint64(st.Nlink) != nlink {
			t.Errorf("%s: inode %d nlink %d, want inode %d nlink %d", p, st.Ino, st.Nlink, first.Ino, nlink)
		}
	}
}

// testHardLinks: link(2) gives a file a second name; both are one file
// (write through one, read through the other); the names go one at a
// time; rename onto a link of the same file does nothing; link's errnos
// are a local file system's.
func testHardLinks(t *testing.T, dir string) {
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, []byte("one"))
	if err := os.Link(a, b); err != nil {
		t.Fatalf("link: %v", err)
	}
	wantLinks(t, 2, a, b)
	f, err := os.OpenFile(b, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("two")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, a); string(got) != "onetwo" {
		t.Errorf("read through the first name = %q, want what the second wrote", got)
	}
	if err := os.Chmod(a, 0o600); err != nil {
		t.Fatal(err)
	}
	if st := statT(t, b); st.Mode&0o777 != 0o600 {
		t.Errorf("chmod through one name: the other's mode is %o", st.Mode&0o777)
	}
	if names := listNames(t, dir); !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("readdir = %v", names)
	}

	// Renaming one name onto the other does nothing: both stay.
	if err := os.Rename(a, b); err != nil {
		t.Errorf("rename onto a link of the same file: %v", err)
	}
	wantLinks(t, 2, a, b)

	// Links in a subdirectory go with it; the file keeps its other names.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(a, filepath.Join(sub, "c")); err != nil {
		t.Fatal(err)
	}
	wantLinks(t, 3, a, b, filepath.Join(sub, "c"))
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	wantLinks(t, 2, a, b)

	// Another file renamed over one name leaves the other.
	other := filepath.Join(dir, "other")
	writeFile(t, other, []byte("other"))
	if err := os.Rename(other, b); err != nil {
		t.Fatal(err)
	}
	wantLinks(t, 1, a)
	if got := readFile(t, a); string(got) != "onetwo" {
		t.Errorf("after a rename over its other name: %q", got)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(a); !os.IsNotExist(err) {
		t.Errorf("after the last unlink: %v", err)
	}

	// Symbolic links are linked, not followed (linkat without
	// AT_SYMLINK_FOLLOW); fifos too.
	l := filepath.Join(dir, "l")
	if err := os.Symlink("b", l); err != nil {
		t.Fatal(err)
	}
	if err := unix.Linkat(unix.AT_FDCWD, l, unix.AT_FDCWD, l+"2", 0); err != nil {
		t.Fatalf("link of a symbolic link: %v", err)
	}
	wantLinks(t, 2, l, l+"2")
	if got, err := os.Readlink(l + "2"); err != nil || got != "b" {
		t.Errorf("readlink of the link: %q %v", got, err)
	}
	p := filepath.Join(dir, "p")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(p, p+"2"); err != nil {
		t.Fatalf("link of a fifo: %v", err)
	}
	wantLinks(t, 2, p, p+"2")

	wantErrno(t, "link onto an existing name", os.Link(b, l), syscall.EEXIST)
	wantErrno(t, "link onto itself", os.Link(b, b), syscall.EEXIST)
	wantErrno(t, "link of a missing file", os.Link(filepath.Join(dir, "nope"), filepath.Join(dir, "x")), syscall.ENOENT)
	wantErrno(t, "link into a missing directory", os.Link(b, filepath.Join(dir, "nope", "x")), syscall.ENOENT)
	wantErrno(t, "link below a file", os.Link(b, filepath.Join(b, "x")), syscall.ENOTDIR)
	wantErrno(t, "link of a directory", os.Link(dir, filepath.Join(dir, "d2")), syscall.EPERM)
	wantErrno(t, "link to a long name", os.Link(b, filepath.Join(dir, strings.Repeat("n", 256))), syscall.ENAMETOOLONG)
}

// testHardLinkOpenFile: a file open through one name keeps working when
// another name goes, and when its own name goes while another remains
// (fstat counts the names left); nothing hidden outlives the last close.
func testHardLinkOpenFile(t *testing.T, dir string) {
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	writeFile(t, a, []byte("data"))
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	// Open through a, remove b: a stays. (The mount may keep b as a
	// hidden name until the last close: an open file names one of its
	// paths, and the kernel does not say which name it was opened by.)
	f, err := os.OpenFile(a, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	if names := visibleNames(t, dir); !slices.Equal(names, []string{"a"}) {
		t.Errorf("after removing the other name: %v", names)
	}
	wantFstatLinks(t, f, 1)
	wantLinks(t, 1, a)
	checkThrough(t, f, []byte("data"))
	if got := readFile(t, a); string(got) != "data and after" {
		t.Errorf("read through the name = %q", got)
	}
	waitHiddenGone(t, dir)

	// Open through a, remove a: b has the data, f keeps writing.
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	f, err = os.OpenFile(a, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	wantFstatLinks(t, f, 1)
	if _, err := f.WriteAt([]byte("DATA"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, b); string(got) != "DATA and after" {
		t.Errorf("read through the other name after writing through the removed one = %q", got)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitHiddenGone(t, dir)
	wantLinks(t, 1, b)

	// Open through b and through c, remove both: both descriptors keep
	// the file, and its last close leaves nothing.
	if err := os.Link(b, c); err != nil {
		t.Fatal(err)
	}
	fb, err := os.OpenFile(b, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := os.OpenFile(c, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{b, c} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	wantFstatLinks(t, fb, 0)
	wantFstatLinks(t, fc, 0)
	if _, err := fc.WriteAt([]byte("!"), 14); err != nil {
		t.Fatal(err)
	}
	if err := fc.Close(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 20)
	if k, _ := fb.ReadAt(got, 0); !bytes.Equal(got[:k], []byte("DATA and after!")) {
		t.Errorf("read through one removed name what the other wrote: %q", got[:k])
	}
	if err := fb.Close(); err != nil {
		t.Fatal(err)
	}
	waitHiddenGone(t, dir)
	if names := listNames(t, dir); len(names) != 0 {
		t.Errorf("left after the last close: %v", names)
	}
}

// visibleNames lists dir without the hidden names of open files.
func visibleNames(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	for _, n := range listNames(t, dir) {
		if !strings.HasPrefix(n, hiddenPrefix) {
			names = append(names, n)
		}
	}
	return names
}

func wantFstatLinks(t *testing.T, f *os.File, nlink uint64) {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatalf("fstat: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); uint64(st.Nlink) != nlink || !fi.Mode().IsRegular() {
		t.Errorf("fstat: %v nlink %d, want a file with nlink %d", fi.Mode(), st.Nlink, nlink)
	}
}
