package chunkstore

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// files lists every file of m.
func files(m *MemFS) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for name := range m.files {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func TestIncomingInvisibleUntilCommit(t *testing.T) {
	m := NewMemFS(1 << 30)
	s := openStore(t, m, "/d")
	data := randBytes(rand.New(rand.NewPCG(1, 1)), 3*BlockSize+777)
	in, err := s.BeginIncoming(4, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{100000, 70000, 1, len(data) - 170001} { // pieces across block boundaries
		if err := in.Write(data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
		if _, err := s.Info(4); chunkfs.KindOf(err) != chunkfs.KindNotExist || len(s.List()) != 0 {
			t.Fatalf("incoming replica visible before commit: %v", err)
		}
	}
	data = randBytes(rand.New(rand.NewPCG(1, 1)), 3*BlockSize+777)
	info, err := in.Commit()
	if err != nil || info.Version != 2 || info.Length != int64(len(data)) {
		t.Fatalf("commit: %+v, %v", info, err)
	}
	if got := readAll(t, s, 4); !bytes.Equal(got, data) {
		t.Fatal("committed replica differs")
	}
	_, sums, _ := s.ReadWithSums(4, 0, make([]byte, len(data)), nil)
	if !slices.Equal(sums, checksum.Blocks(nil, data)) {
		t.Fatal("committed block sums differ")
	}
	for _, f := range files(m) {
		if strings.Contains(f, ".incoming") {
			t.Errorf("left behind: %s", f)
		}
	}
	if m.Pending() != 0 {
		t.Errorf("%d operations not durable after commit", m.Pending())
	}
	// Durable: a crash right after keeps it.
	m.Crash(0, 0)
	if got := readAll(t, openStore(t, m, "/d"), 4); !bytes.Equal(got, data) {
		t.Fatal("committed replica lost in a crash")
	}
}

func TestIncomingAbortAndCrashLeaveNothing(t *testing.T) {
	m := NewMemFS(1 << 30)
	s := openStore(t, m, "/d")
	in, err := s.BeginIncoming(5, 1)
	if err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("partial"))
	in.Abort()
	if fs := files(m); len(fs) != 0 {
		t.Fatalf("abort left %v", fs)
	}
	if _, err := in.Commit(); err == nil {
		t.Fatal("commit after abort succeeded")
	}
	// A crash in the middle of a clone leaves temporary files, which the
	// next open removes without loading anything.
	in, _ = s.BeginIncoming(6, 1)
	in.Write([]byte("half a clone"))
	m.Crash(5, 0)
	s2 := openStore(t, m, "/d")
	if len(s2.List()) != 0 {
		t.Fatalf("crashed clone loaded: %v", s2.List())
	}
	if fs := files(m); len(fs) != 0 {
		t.Fatalf("open left %v", fs)
	}
}

func TestIncomingVersions(t *testing.T) {
	s := openStore(t, NewMemFS(1<<30), "/d")
	if err := s.Create(7, 3); err != nil {
		t.Fatal(err)
	}
	s.Write(7, 0, []byte("version three"))
	for v, want := range map[chunkfs.Version]chunkfs.Kind{3: chunkfs.KindExist, 2: chunkfs.KindStale} {
		if _, err := s.BeginIncoming(7, v); chunkfs.KindOf(err) != want {
			t.Errorf("incoming at %d over a replica at 3: %v, want %v", v, err, want)
		}
	}
	in, err := s.BeginIncoming(7, 4)
	if err != nil {
		t.Fatal(err)
	}
	// A replica at the new version that appears meanwhile wins.
	in2, _ := s.BeginIncoming(7, 4)
	in2.Write([]byte("first"))
	if _, err := in2.Commit(); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("version four"))
	if _, err := in.Commit(); chunkfs.KindOf(err) != chunkfs.KindExist {
		t.Fatalf("second commit at one version: %v, want KindExist", err)
	}
	if got := readAll(t, s, 7); string(got) != "first" {
		t.Fatalf("replica %q", got)
	}
	// An older replica is replaced; the store still counts one chunk.
	in, _ = s.BeginIncoming(7, 5)
	in.Write([]byte("five"))
	if _, err := in.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, 7); string(got) != "five" || len(s.List()) != 1 || s.perDir[0] != 1 {
		t.Fatalf("after replacing: %q, %v, %v", got, s.List(), s.perDir)
	}
	in, _ = s.BeginIncoming(8, 1)
	if err := in.Write(make([]byte, 5<<20)); chunkfs.KindOf(err) != chunkfs.KindTooLarge {
		t.Fatalf("incoming beyond the chunk size: %v", err)
	}
	in.Abort()
}
