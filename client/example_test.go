package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"strings"

	"github.com/chunkfs/chunkfs/chunkfstest"
	"github.com/chunkfs/chunkfs/client"
)

// startExample starts a throwaway cluster, as a user's test would.
func startExample() *chunkfstest.Cluster {
	tc, err := chunkfstest.Start(chunkfstest.ChunkSize(256 << 10))
	if err != nil {
		log.Fatal(err)
	}
	return tc
}

func ExampleDial() {
	tc := startExample()
	defer tc.Close()
	ctx := context.Background()

	c, err := client.Dial(ctx, tc.MasterAddr())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println(c.ChunkSize())
	// Output: 262144
}

func ExampleClient_Create() {
	tc := startExample()
	defer tc.Close()
	ctx := context.Background()
	c := tc.Client()

	f, err := c.Create(ctx, "/hello.txt")
	if err != nil {
		log.Fatal(err)
	}
	io.WriteString(f, "hello, chunkfs\n")
	if err := f.Close(); err != nil { // data is on every replica once Close returns
		log.Fatal(err)
	}

	r, err := c.Open(ctx, "/hello.txt")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	io.Copy(os.Stdout, r)
	// Output: hello, chunkfs
}

func ExampleFile_Append() {
	tc := startExample()
	defer tc.Close()
	ctx := context.Background()
	c := tc.Client()

	f, err := c.Create(ctx, "/events")
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range []string{"start", "work", "stop"} {
		if _, err := f.Append([]byte(ev)); err != nil { // many writers may append at once
			log.Fatal(err)
		}
	}
	f.Close()

	r, _ := c.Open(ctx, "/events")
	defer r.Close()
	rr := client.NewRecordReader(r, c.MaxRecord())
	for {
		rec, err := rr.Next()
		if err == io.EOF {
			break
		}
		fmt.Println(string(rec.Data))
	}
	// Output:
	// start
	// work
	// stop
}

func ExampleClient_FS() {
	tc := startExample()
	defer tc.Close()
	ctx := context.Background()
	c := tc.Client()

	c.MkdirAll(ctx, "/logs/2026", 0o755)
	f, _ := c.Create(ctx, "/logs/2026/jan")
	f.Close()

	fs.WalkDir(c.FS(ctx), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fmt.Println(p, d.IsDir())
		return nil
	})
	// Output:
	// . true
	// logs true
	// logs/2026 true
	// logs/2026/jan false
}

func ExampleClient_Stat() {
	tc := startExample()
	defer tc.Close()
	ctx := context.Background()
	c := tc.Client()

	_, err := c.Stat(ctx, "/missing")
	fmt.Println(strings.Contains(err.Error(), "/missing"), errorsIsNotExist(err))
	// Output: true true
}

func errorsIsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
