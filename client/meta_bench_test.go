package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
)

// The metadata benchmarks measure what a user of the library gets: 64
// goroutines calling client.Stat or client.Create through one
// *client.Client against an in-process master (durable log, fsync on) over
// loopback gRPC. "batched" is the default client; "unary" sends every call
// as its own RPC (MetaBatch 1), the reference measured in the same run.

// metaClient returns a cluster with one chunkserver and a client of it with
// the given MetaBatch.
func metaClient(b *testing.B, batch int) *client.Client {
	tc := chunkfstest.NewCluster(b, chunkfstest.Chunkservers(1))
	cfg := client.DefaultConfig()
	cfg.Master = tc.MasterAddr()
	cfg.Caller = chunkfs.Root
	cfg.MetaBatch = batch
	c, err := client.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

var metaModes = []struct {
	name  string
	batch int
}{{"batched", 0}, {"unary", 1}}

// BenchmarkClientCreate: durable creates (each acknowledged after its log
// entry is fsynced) by 64 concurrent callers.
func BenchmarkClientCreate(b *testing.B) {
	for _, mode := range metaModes {
		b.Run(mode.name, func(b *testing.B) {
			c, ctx := metaClient(b, mode.batch), context.Background()
			const dirs = 64
			for d := range dirs {
				if err := c.Mkdir(ctx, fmt.Sprintf("/d%02d", d), 0o777); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			runParallel(b, "creates/s", func() error {
				i := next.Add(1)
				f, err := c.Create(ctx, fmt.Sprintf("/d%02d/f%d", i%dirs, i))
				if err != nil {
					return err
				}
				return f.Close()
			})
		})
	}
}

// BenchmarkClientStat: stats of 100 files by 64 concurrent callers.
func BenchmarkClientStat(b *testing.B) {
	for _, mode := range metaModes {
		b.Run(mode.name, func(b *testing.B) {
			c, ctx := metaClient(b, mode.batch), context.Background()
			paths := make([]string, 100)
			for i := range paths {
				paths[i] = fmt.Sprintf("/a/b/c/f%d", i)
				if i == 0 {
					if err := c.MkdirAll(ctx, "/a/b/c", 0o777); err != nil {
						b.Fatal(err)
					}
				}
				f, err := c.Create(ctx, paths[i])
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
			var next atomic.Int64
			runParallel(b, "stats/s", func() error {
				_, err := c.Stat(ctx, paths[next.Add(1)%100])
				return err
			})
		})
	}
}

// runParallel runs op b.N times from 64 goroutines and reports operations
// per second and the process's CPU time per operation (client, master and
// chunkserver together).
func runParallel(b *testing.B, unit string, op func() error) {
	b.SetParallelism(32) // 64 callers on 2 CPUs
	b.ResetTimer()
	cpu := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
