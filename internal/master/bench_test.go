package master

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// benchClients returns n gRPC clients on separate connections, as n client
// processes would have.
func benchClients(b *testing.B, addr string, n int) []pb.MasterClient {
	out := make([]pb.MasterClient, n)
	for i := range out {
		cc, err := rpc.Dial(addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cc.Close() })
		out[i] = pb.NewMasterClient(cc)
	}
	return out
}

// cpuTime returns the CPU time this process has used (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per operation (client and
// server together), a figure that a busy shared machine distorts less than
// operations per second.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkCreate measures durable creates (fsynced to the log before the
// answer) over gRPC on loopback with 64 concurrent callers.
func BenchmarkCreate(b *testing.B) {
	tm := startMaster(b, "", nil)
	const dirs = 64
	for d := range dirs {
		tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: fmt.Sprintf("/d%02d", d), Mode: 0o777})
	}
	clients := benchClients(b, tm.addr, 2)
	var next atomic.Int64
	b.SetParallelism(32) // 64 callers on 2 CPUs
	b.ResetTimer()
	cpu := cpuTime()
	defer reportCPU(b, cpu)
	b.RunParallel(func(pb_ *testing.PB) {
		for pb_.Next() {
			i := next.Add(1)
			c := clients[i%int64(len(clients))]
			if _, err := c.Create(bg, &pb.CreateRequest{Caller: root, Path: fmt.Sprintf("/d%02d/f%d", i%dirs, i), Mode: 0o644}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

// BenchmarkStat measures stats over gRPC on loopback with 64 concurrent
// callers.
func BenchmarkStat(b *testing.B) {
	tm := startMaster(b, "", nil)
	tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: "/a/b/c", Mode: 0o777, Parents: true})
	for i := range 100 {
		tm.create(root, fmt.Sprintf("/a/b/c/f%d", i))
	}
	clients := benchClients(b, tm.addr, 2)
	var next atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	cpu := cpuTime()
	defer reportCPU(b, cpu)
	b.RunParallel(func(pb_ *testing.PB) {
		for pb_.Next() {
			i := next.Add(1)
			c := clients[i%int64(len(clients))]
			if _, err := c.Stat(bg, &pb.StatRequest{Caller: root, Path: fmt.Sprintf("/a/b/c/f%d", i%100)}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "stats/s")
}

// BenchmarkStatHandler calls the Stat handler directly, without gRPC, with
// 64 concurrent callers: the master's own cost of a stat.
func BenchmarkStatHandler(b *testing.B) {
	tm := startMaster(b, "", nil)
	tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: "/a/b/c", Mode: 0o777, Parents: true})
	for i := range 100 {
		tm.create(root, fmt.Sprintf("/a/b/c/f%d", i))
	}
	paths := make([]string, 100)
	for i := range paths {
		paths[i] = fmt.Sprintf("/a/b/c/f%d", i)
	}
	var next atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb_ *testing.PB) {
		for pb_.Next() {
			i := next.Add(1)
			if _, err := tm.m.Server().Stat(bg, &pb.StatRequest{Caller: root, Path: paths[i%100]}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "stats/s")
}

// BenchmarkBatchStat and BenchmarkBatchCreate measure the master's side of
// batching without the client library: two connections, each with two
// senders of Batch calls of 32 ops (as the client's lanes send for 64
// callers). b.N counts ops, not calls.
func BenchmarkBatchStat(b *testing.B) {
	tm := startMaster(b, "", nil)
	tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: "/a/b/c", Mode: 0o777, Parents: true})
	for i := range 100 {
		tm.create(root, fmt.Sprintf("/a/b/c/f%d", i))
	}
	benchBatches(b, tm, "stats/s", func(i int64) *pb.MetaOp {
		return statOp(root, fmt.Sprintf("/a/b/c/f%d", i%100))
	})
}

func BenchmarkBatchCreate(b *testing.B) {
	tm := startMaster(b, "", nil)
	const dirs = 64
	for d := range dirs {
		tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: fmt.Sprintf("/d%02d", d), Mode: 0o777})
	}
	benchBatches(b, tm, "creates/s", func(i int64) *pb.MetaOp {
		return createOp(root, fmt.Sprintf("/d%02d/f%d", i%dirs, i), false)
	})
}

func benchBatches(b *testing.B, tm *testMaster, unit string, op func(int64) *pb.MetaOp) {
	const senders, perBatch = 4, 32
	clients := benchClients(b, tm.addr, 2)
	var next atomic.Int64
	b.ResetTimer()
	cpu := cpuTime()
	defer reportCPU(b, cpu)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[s%len(clients)]
			for {
				first := next.Add(perBatch) - perBatch
				if first >= int64(b.N) {
					return
				}
				req := &pb.BatchRequest{}
				for i := first; i < min(first+perBatch, int64(b.N)); i++ {
					req.Ops = append(req.Ops, op(i))
				}
				resp, err := c.Batch(bg, req)
				if err != nil {
					b.Error(err)
					return
				}
				for _, r := range resp.Results {
					if r.GetError() != nil {
						b.Error(r.GetError())
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}
