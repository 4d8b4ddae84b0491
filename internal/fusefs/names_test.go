package fusefs

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs"
	"golang.org/x/sys/unix"
)

// unhideGate is a memory twin whose removals of hidden names wait, once
// the name is gone, until the test lets them answer.
type unhideGate struct {
	*memBackend
	removed chan struct{} // closed when a hidden name is gone
	answer  chan struct{} // closed by the test: the removal answers
}

func (b *unhideGate) Remove(ctx context.Context, c chunkfs.Caller, p string) (*chunkfs.FileInfo, error) {
	fi, err := b.memBackend.Remove(ctx, c, p)
	if strings.HasPrefix(path.Base(p), hiddenPrefix) {
		close(b.removed)
		<-b.answer
	}
	return fi, err
}

// TestUnhideNeverCountsTooFewLinks: while the last release of a file open
// through a removed name removes its hidden name, the file's other name
// never shows 0 links (the kernel would then refuse link(2) of it with
// ENOENT, as TestPOSIXCluster/cached/HardLinkOpenFile once failed under
// load), and the name can be linked again at once.
func TestUnhideNeverCountsTooFewLinks(t *testing.T) {
	b := &unhideGate{memBackend: newMemBackend(), removed: make(chan struct{}), answer: make(chan struct{})}
	mnt := mountT(t, b, DefaultConfig())
	a, bn := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	writeFile(t, a, []byte("data"))
	if err := os.Link(a, bn); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(bn, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(bn); err != nil {
		t.Fatal(err)
	}
	if names := visibleNames(t, mnt); len(names) != 1 || names[0] != "a" {
		t.Fatalf("after removing the open name: %v", names)
	}
	if err := f.Close(); err != nil { // its release removes the hidden name
		t.Fatal(err)
	}
	<-b.removed
	var st unix.Statx_t
	err = unix.Statx(unix.AT_FDCWD, a, unix.AT_STATX_FORCE_SYNC, unix.STATX_NLINK, &st)
	close(b.answer)
	if err != nil {
		t.Fatal(err)
	}
	if st.Nlink == 0 {
		t.Errorf("%s has 0 links while the hidden name goes", a)
	}
	waitHiddenGone(t, mnt)
	if err := os.Link(a, bn); err != nil {
		t.Fatalf("link after the hidden name went: %v", err)
	}
	wantLinks(t, 2, a, bn)
}
