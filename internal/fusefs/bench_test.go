package fusefs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
)

func BenchmarkFioTiotest(b *testing.B) { benchFio(b, "tiotest.fio", nil) }

func BenchmarkFioStreams(b *testing.B) {
	for _, jobs := range []string{"1", "4"} {
		b.Run("jobs="+jobs, func(b *testing.B) {
			benchFio(b, "streams.fio", []string{"JOBS=" + jobs, "SIZE=128m"})
		})
	}
}

func benchFio(b *testing.B, job string, env []string) {
	if _, err := exec.LookPath("fio"); err != nil {
		b.Skip("fio not installed")
	}
	needFuse(b)
	jf := jobFile(b, job)
	b.Run("local", func(b *testing.B) { runFio(b, jf, b.TempDir(), env) })
	tc := chunkfstest.NewCluster(b, chunkfstest.ChunkSize(64<<20))
	for _, v := range selectedVariants() {
		b.Run(v.name, func(b *testing.B) {
			var mnt string
			if os.Getenv("CHUNKFS_BENCH_TRACE") != "" {
				mnt = mountTraced(b, tc, v.cfg)
			} else {
				mnt = mountCluster(b, tc, v.cfg)
			}
			dir := filepath.Join(mnt, v.name)
			if err := os.MkdirAll(dir, 0o755); err != nil { // -count reuses the cluster
				b.Fatal(err)
			}
			runFio(b, jf, dir, env)
		})
	}
}

// mountTraced is mountCluster whose client counts the writes it sends to
// the chunkservers ($CHUNKFS_BENCH_TRACE): how many, how many bytes, and
// the time of their steps, logged when the benchmark ends.
func mountTraced(b *testing.B, tc *chunkfstest.Cluster, cfg Config) string {
	var (
		mu            sync.Mutex // guards the counts
		n, bytes      int64
		small         int64 // writes under 64 KiB
		took, push    time.Duration
		wait, apply   time.Duration
		prepare, errs int64
		retries       int64
		why           = map[string]int{} // failed attempts by error, first 80 bytes
	)
	cc := client.DefaultConfig()
	cc.Master = tc.MasterAddr()
	cc.RetryTimeout = 20 * time.Second
	cc.Logger = testLogger(b)
	cc.Trace = &client.Trace{WriteAttempt: func(w client.WriteAttempt) {
		mu.Lock()
		defer mu.Unlock()
		n++
		bytes += int64(w.Length)
		if w.Length < 64<<10 {
			small++
		}
		took, push, wait, apply = took+w.Took, push+w.Push, wait+w.Wait, apply+w.Apply
		prepare += int64(w.Prepare)
		if w.Err != nil {
			errs++
			e := w.Err.Error()
			why[e[:min(len(e), 80)]]++
		}
	}, Retry: func(r client.Retry) {
		mu.Lock()
		defer mu.Unlock()
		retries++
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	be, err := NewClientBackend(ctx, cc)
	if err != nil {
		b.Fatalf("client backend: %v", err)
	}
	b.Cleanup(func() { be.Close() })
	cfg.OpTimeout = 20 * time.Second
	mnt := mountT(b, be, cfg)
	b.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stderr, "%s: writes %d (%d under 64 KiB, %d failed, %d retried), %d MB; summed: took %v, prepare %v, push %v, wait %v, apply %v\n",
			b.Name(), n, small, errs, retries, bytes/1e6, took, time.Duration(prepare), push, wait, apply)
		for e, k := range why {
			fmt.Fprintf(os.Stderr, "  %d× %s\n", k, e)
		}
	})
	return mnt
}

// BenchmarkClientRewrite is the floor of tiotest's random write on a
// mount: the push its close makes, done by the client alone. 16 writers
// each rewrite a 32 MB file of the cluster in 1 MB writes, as the
// kernel's write-back sends a whole dirty file, and close it (synced on
// every replica).
func BenchmarkClientRewrite(b *testing.B) {
	const writers, size, block = 16, 32 << 20, 1 << 20
	tc := chunkfstest.NewCluster(b, chunkfstest.ChunkSize(64<<20))
	c, ctx := tc.Client(), context.Background()
	data := make([]byte, block)
	write := func(i int) error {
		f, err := c.OpenFile(ctx, "/rewrite."+strconv.Itoa(i), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		for off := 0; off < size; off += block {
			if _, err := f.WriteAt(data, int64(off)); err != nil {
				f.Close()
				return err
			}
		}
		return f.Close()
	}
	all := func() error {
		errs := make(chan error, writers)
		for i := range writers {
			go func() { errs <- write(i) }()
		}
		var first error
		for range writers {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	if err := all(); err != nil { // the files exist, as after tiotest's write phase
		b.Fatal(err)
	}
	b.SetBytes(writers * size)
	for b.Loop() {
		if err := all(); err != nil {
			b.Fatal(err)
		}
	}
}
