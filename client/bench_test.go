package client_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/chunkfs/chunkfs/chunkfstest"
)

// BenchmarkWrite measures a streaming write through the client into an
// in-process cluster of three chunkservers (every byte stored three times,
// synced on Close), with 8 MiB chunks.
func BenchmarkWrite(b *testing.B) {
	tc := chunkfstest.NewCluster(b, chunkfstest.ChunkSize(8<<20))
	c, ctx := tc.Client(), context.Background()
	const size = 64 << 20
	block := randomBytes(5, 1<<20)
	b.SetBytes(size)
	for i := 0; b.Loop(); i++ {
		f, err := c.Create(ctx, fmt.Sprintf("/w%d", i))
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < size; n += len(block) {
			if _, err := f.Write(block); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead measures a streaming read (io.Copy, 32 KiB reads) of a
// 64 MiB file.
func BenchmarkRead(b *testing.B) {
	tc := chunkfstest.NewCluster(b, chunkfstest.ChunkSize(8<<20))
	c, ctx := tc.Client(), context.Background()
	const size = 64 << 20
	f, err := c.Create(ctx, "/r")
	if err != nil {
		b.Fatal(err)
	}
	data := randomBytes(6, size)
	if _, err := f.Write(data); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	for b.Loop() {
		r, err := c.Open(ctx, "/r")
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, r); err != nil || n != size {
			b.Fatal(n, err)
		}
		r.Close()
	}
}

// BenchmarkAppend measures 1 KiB record appends by one writer.
func BenchmarkAppend(b *testing.B) {
	tc := chunkfstest.NewCluster(b, chunkfstest.ChunkSize(8<<20))
	c, ctx := tc.Client(), context.Background()
	f, err := c.Create(ctx, "/a")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rec := randomBytes(7, 1<<10)
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if _, err := f.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
}
