package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
)

// TestMountDeletesIntoTheTrash: on a mount, unlink, rmdir and a rename
// over a file move what they remove to the trash, from which it is
// undeleted whole.
func TestMountDeletesIntoTheTrash(t *testing.T) {
	needFuse(t)
	tc := chunkfstest.NewCluster(t, chunkfstest.ChunkSize(testChunkSize), chunkfstest.TrashPeriod(time.Hour))
	mnt := mountCluster(t, tc, DefaultConfig())
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(mnt, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "unlinked")
	write("b", "replaced")
	write("c", "new")
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.Remove(filepath.Join(mnt, "a")),
		os.Rename(filepath.Join(mnt, "c"), filepath.Join(mnt, "b")),
		os.Remove(filepath.Join(mnt, "d")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	c := tc.Client()
	es, _, err := c.Trash(ctx)
	if err != nil || len(es) != 3 || es[0].Path != "/a" || es[1].Path != "/b" || es[2].Path != "/d" {
		t.Fatalf("trash after unlink, rename over and rmdir: %+v, %v", es, err)
	}
	if _, err := c.Undelete(ctx, "/b", client.UndeleteOptions{To: "/b.old"}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "b.old")); err != nil || string(got) != "replaced" {
		t.Fatalf("undeleted replaced file through the mount: %q, %v", got, err)
	}
}
