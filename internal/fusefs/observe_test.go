package fusefs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/hanwen/go-fuse/v2/fuse"
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
	f, _, _, err := b.Create(ctx, root, "/f", 0o644, true, false, time.Time{})
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

// opLog records the operations an OpObserver is told of.
type opLog struct {
	mu   sync.Mutex // guards seen and errs
	seen map[string]int
	errs map[string]syscall.Errno // the last errno of each op that failed
}

func newOpLog() *opLog { return &opLog{seen: map[string]int{}, errs: map[string]syscall.Errno{}} }

func (l *opLog) observe(op string, errno syscall.Errno, _ time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[op]++
	if errno != 0 {
		l.errs[op] = errno
	}
}

func (l *opLog) count(op string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[op]
}

// TestObservedRawTimesEveryOperation calls every method of the raw file
// system interface on an observed go-fuse default (which answers ENOSYS)
// and checks each operation is reported once under its name, with its
// errno; only the bookkeeping methods are not operations.
func TestObservedRawTimesEveryOperation(t *testing.T) {
	ops := newOpLog()
	raw := fuse.RawFileSystem(&observedRaw{fs: fuse.NewDefaultRawFileSystem(), obs: ops.observe})
	notOps := map[string]bool{"String": true, "SetDebug": true, "Init": true, "OnUnmount": true}
	v := reflect.ValueOf(raw)
	typ := reflect.TypeOf((*fuse.RawFileSystem)(nil)).Elem()
	want := map[string]bool{}
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		if notOps[m.Name] {
			continue
		}
		fn := v.MethodByName(m.Name)
		args := make([]reflect.Value, fn.Type().NumIn())
		for j := range args {
			args[j] = reflect.Zero(fn.Type().In(j))
		}
		fn.Call(args)
		if m.Name != "Writev" { // ENOSYS from Writev: go-fuse calls Write, reported as "write"
			want[rawOpName(m.Name)] = true
		}
	}
	if len(want) < 38 {
		t.Fatalf("only %d operations in the interface?", len(want))
	}
	for op := range want {
		if n := ops.count(op); n != 1 {
			t.Errorf("%s reported %d times", op, n)
		}
	}
	if len(ops.seen) != len(want) {
		t.Errorf("reported %v, want %v", ops.seen, want)
	}
	if ops.errs["lookup"] != syscall.ENOSYS || ops.errs["forget"] != 0 {
		t.Errorf("errnos %v", ops.errs)
	}
}

// rawOpName is the kernel's name of the raw method name.
func rawOpName(method string) string {
	if op, ok := map[string]string{"CopyFileRange": "copy_file_range"}[method]; ok {
		return op
	}
	return strings.ToLower(method)
}

// TestMountReportsKernelOperations mounts the in-memory backend with an
// OpObserver and checks that what a program does through the kernel
// arrives as the FUSE operations it is made of, failures with their errno.
func TestMountReportsKernelOperations(t *testing.T) {
	ops := newOpLog()
	cfg := DefaultConfig().NoCache() // every read reaches the mount
	cfg.Ops = ops.observe
	mnt := mountT(t, newMemBackend(), cfg)
	p := filepath.Join(mnt, "f")
	if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("H"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, err := os.ReadFile(p); err != nil || string(b) != "Hello" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of a missing file: %v", err)
	}
	d := filepath.Join(mnt, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Rmdir(d); err != syscall.ENOTEMPTY {
		t.Fatalf("rmdir of a full directory: %v", err)
	}
	for _, op := range []string{"lookup", "getattr", "create", "open", "write", "flush", "fsync", "read", "release", "mkdir", "rmdir"} {
		if ops.count(op) == 0 {
			t.Errorf("no %s reported; reported %v", op, ops.seen)
		}
	}
	ops.mu.Lock()
	defer ops.mu.Unlock()
	if ops.errs["lookup"] != syscall.ENOENT || ops.errs["rmdir"] != syscall.ENOTEMPTY {
		t.Errorf("errnos reported: %v; want lookup ENOENT, rmdir ENOTEMPTY", ops.errs)
	}
}
