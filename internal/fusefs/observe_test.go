package fusefs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
)

func TestObservedTimesEveryCall(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	b := Observed(newMemBackend(), func(op string, _ time.Duration) {
		mu.Lock()
		seen[op]++
		mu.Unlock()
	})
	ctx, root := context.Background(), chunkfs.Root
	f, _, err := b.Create(ctx, root, "/f", 0o644, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, []byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 5)
	if _, err := f.ReadAt(ctx, p, 0); err != nil || string(p) != "hello" {
		t.Fatalf("read %q, %v", p, err)
	}
	f.Sync(ctx)
	f.Close()
	b.Stat(ctx, root, "/f")
	b.ReadDir(ctx, root, "/")
	if _, _, err := b.Open(ctx, root, "/nope", false); err == nil {
		t.Error("opened a file that does not exist")
	}
	for _, op := range []string{"create", "write", "read", "fsync", "release", "stat", "readdir", "open"} {
		if seen[op] != 1 {
			t.Errorf("%s observed %d times", op, seen[op])
		}
	}
}
