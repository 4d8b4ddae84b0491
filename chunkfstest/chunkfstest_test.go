package chunkfstest_test

import (
	"context"
	"io"
	"testing"

	"github.com/chunkfs/chunkfs/chunkfstest"
)

func TestTLSCluster(t *testing.T) {
	c := chunkfstest.NewCluster(t, chunkfstest.TLS(), chunkfstest.ChunkSize(64<<10))
	if c.Security().IsInsecure() || c.TLSDir() == "" {
		t.Fatal("a TLS cluster's client has no certificate")
	}
	ctx := context.Background()
	fs := c.Client()
	f, err := fs.Create(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 200<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := fs.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil || string(got) != string(data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
}
