package fusefs

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The fio benchmarks run the job files of ../shared/bench (or
// $CHUNKFS_BENCH_DIR) on a local directory and on mounts of an in-process
// cluster with each cache layer on and off. They are not run in CI:
//
//	go test -run '^$' -bench Fio -benchtime 1x ./internal/fusefs
//
// Each reports MB/s and mean latency (µs) per fio phase.

// benchVariant is a mount configuration compared in the benchmarks.
type benchVariant struct {
	name string
	cfg  Config
}

// benchVariants are the mount configurations compared.
func benchVariants() []benchVariant {
	off := func(f func(*Config)) Config { c := DefaultConfig(); f(&c); return c }
	return []benchVariant{
		{"all-on", DefaultConfig()},
		{"no-md-cache", off(func(c *Config) { c.AttrTimeout, c.EntryTimeout = 0, 0 })},
		{"no-read-ahead", off(func(c *Config) { c.ReadAhead = 0 })},
		{"no-write-behind", off(func(c *Config) { c.WriteBehind = 0 })},
		{"no-writeback-cache", off(func(c *Config) { c.WritebackCache = false })},
		{"no-dirty-limit", off(func(c *Config) { c.DirtyLimit = 0 })},
		{"no-io-cache", off(func(c *Config) { c.KeepCache = false })},
		{"no-block-cache", off(func(c *Config) { c.CacheSize = 0 })},
		{"no-quick-read", off(func(c *Config) { c.QuickRead = 0 })},
		{"no-cache", DefaultConfig().NoCache()},
	}
}

func jobFile(b *testing.B, name string) string {
	dir := os.Getenv("CHUNKFS_BENCH_DIR")
	if dir == "" {
		dir = "/work/shared/bench"
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		b.Skipf("no job file %s", p)
	}
	return p
}

// fioResult is the part of fio's JSON output the benchmarks read.
type fioResult struct {
	Jobs []struct {
		Name  string   `json:"jobname"`
		Read  fioStats `json:"read"`
		Write fioStats `json:"write"`
	} `json:"jobs"`
}

type fioStats struct {
	BW    float64 `json:"bw_bytes"`
	IOs   int64   `json:"total_ios"`
	LatNS struct {
		Mean float64 `json:"mean"`
	} `json:"lat_ns"`
}

func runFio(b *testing.B, jobFile, dir string, env []string) {
	for i := 0; i < b.N; i++ {
		cmd := exec.Command("fio", "--output-format=json", jobFile)
		cmd.Env = append(os.Environ(), append(env, "DIR="+dir)...)
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("fio: %v\n%s", err, out)
		}
		var r fioResult
		if err := json.Unmarshal(out[strings.IndexByte(string(out), '{'):], &r); err != nil {
			b.Fatalf("fio output: %v", err)
		}
		for _, j := range r.Jobs {
			s := j.Read
			if j.Write.IOs > 0 {
				s = j.Write
			}
			b.ReportMetric(s.BW/1e6, j.Name+"-MB/s")
			b.ReportMetric(s.LatNS.Mean/1e3, j.Name+"-lat-µs")
		}
		os.RemoveAll(dir) // leave room for the next variant
		os.Mkdir(dir, 0o755)
	}
}

// BenchmarkFioMemory runs tiotest on a mount of the in-memory backend:
// the cost of the FUSE layer and the caches alone, without a cluster.
func BenchmarkFioMemory(b *testing.B) {
	if _, err := exec.LookPath("fio"); err != nil {
		b.Skip("fio not installed")
	}
	needFuse(b)
	jf := jobFile(b, "tiotest.fio")
	b.Run("local", func(b *testing.B) { runFio(b, jf, b.TempDir(), nil) })
	for _, v := range selectedVariants() {
		b.Run(v.name, func(b *testing.B) {
			runFio(b, jf, mountT(b, newMemBackend(), v.cfg), nil)
		})
	}
}

// selectedVariants returns the variants $CHUNKFS_BENCH_VARIANTS names
// (comma-separated), or all of them.
func selectedVariants() []benchVariant {
	variants := benchVariants()
	v := os.Getenv("CHUNKFS_BENCH_VARIANTS")
	if v == "" {
		return variants
	}
	var keep []benchVariant
	for _, x := range variants {
		if strings.Contains(","+v+",", ","+x.name+",") {
			keep = append(keep, x)
		}
	}
	return keep
}
