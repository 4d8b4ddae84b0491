package fusefs

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/chunkfs/chunkfs/chunkfstest"
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
			mnt := mountCluster(b, tc, v.cfg)
			dir := filepath.Join(mnt, v.name)
			if err := os.MkdirAll(dir, 0o755); err != nil { // -count reuses the cluster
				b.Fatal(err)
			}
			runFio(b, jf, dir, env)
		})
	}
}
