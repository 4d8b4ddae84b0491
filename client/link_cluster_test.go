package client_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
)

// TestLinkThroughCluster makes a hard link through the library, writes
// through one name and reads through the other (one client, and another
// with nothing cached), removes the first name, and checks the refusals.
func TestLinkThroughCluster(t *testing.T) {
	tc := chunkfstest.NewCluster(t, chunkfstest.Chunkservers(1), chunkfstest.Replication(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := tc.Client()
	f, err := c.Create(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Link(ctx, "/a", "/b"); err != nil {
		t.Fatal(err)
	}
	a, _ := c.Stat(ctx, "/a")
	b, err := c.Stat(ctx, "/b")
	if err != nil || a.Inode != b.Inode || b.Nlink != 2 || b.Length != 5 {
		t.Fatalf("stat: %+v, %+v %v", a, b, err)
	}
	f, err = c.OpenFile(ctx, "/b", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(", world"), 5); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := tc.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, p := range []string{"/a", "/b"} {
		for _, cl := range []*client.Client{c, other} {
			if got, err := readAll(ctx, cl, p); err != nil || got != "hello, world" {
				t.Errorf("read %s: %q %v", p, got, err)
			}
		}
	}
	if err := c.Remove(ctx, "/a"); err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(ctx, other, "/b"); err != nil || got != "hello, world" {
		t.Errorf("read /b after removing /a: %q %v", got, err)
	}
	if fi, err := c.Stat(ctx, "/b"); err != nil || fi.Nlink != 1 {
		t.Errorf("stat /b after removing /a: %+v %v", fi, err)
	}

	if err := c.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		old, new string
		want     error
	}{
		{"/b", "/d", fs.ErrExist},
		{"/nope", "/c", fs.ErrNotExist},
		{"/b", "/nope/c", fs.ErrNotExist},
		{"/d", "/d2", fs.ErrPermission},
		{"/b", "relative", nil},
	} {
		err := c.Link(ctx, tc.old, tc.new)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "link ") {
			t.Errorf("Link(%s, %s) = %v, want one line wrapping %v", tc.old, tc.new, err, tc.want)
		}
	}
	if err := c.Link(ctx, "/b", "relative"); chunkfs.KindOf(err) != chunkfs.KindInvalid {
		t.Errorf("relative new path: %v", err)
	}
}

func readAll(ctx context.Context, c *client.Client, p string) (string, error) {
	f, err := c.Open(ctx, p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}
