package chunkstore

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

func TestCopy(t *testing.T) {
	m := NewMemFS(1 << 30)
	s := openStore(t, m, "/d")
	data := randBytes(rand.New(rand.NewPCG(2, 2)), 20*BlockSize+123) // more than one piece
	if err := s.Create(1, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(1, 0, data); err != nil {
		t.Fatal(err)
	}
	info, err := s.Copy(1, 3, 2)
	if err != nil || info.Handle != 2 || info.Version != 3 || info.Length != int64(len(data)) {
		t.Fatalf("copy: %+v %v", info, err)
	}
	if !bytes.Equal(readAll(t, s, 2), data) {
		t.Fatal("copy's bytes differ")
	}
	_, sums, _ := s.ReadWithSums(2, 0, make([]byte, len(data)), nil)
	if !slices.Equal(sums, checksum.Blocks(nil, data)) {
		t.Fatal("copy's block sums differ")
	}
	// The two replicas are independent from now on.
	if err := s.Write(2, 0, []byte("changed")); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readAll(t, s, 1), data) {
		t.Fatal("a write to the copy changed the original")
	}
	// A repeated call keeps the copy made.
	if info, err := s.Copy(1, 3, 2); err != nil || info.Length != int64(len(data)) {
		t.Fatalf("repeated copy: %+v %v", info, err)
	}
	// Survives a reopen.
	s2 := openStore(t, m, "/d")
	if in, err := s2.Info(2); err != nil || in.Version != 3 {
		t.Fatalf("after reopen: %+v %v", in, err)
	}
}

func TestCopyRefusals(t *testing.T) {
	s := openStore(t, NewMemFS(1<<30), "/d")
	s.Create(1, 3)
	s.Write(1, 0, []byte("abc"))
	for _, tc := range []struct {
		src, dst chunkfs.Handle
		v        chunkfs.Version
		want     chunkfs.Kind
	}{
		{1, 1, 3, chunkfs.KindInvalid},
		{1, 0, 3, chunkfs.KindInvalid},
		{1, 2, 2, chunkfs.KindStale},
		{1, 2, 4, chunkfs.KindStale},
		{9, 2, 3, chunkfs.KindNotExist},
	} {
		if _, err := s.Copy(tc.src, tc.v, tc.dst); chunkfs.KindOf(err) != tc.want {
			t.Errorf("copy %d@%d → %d: %v, want %v", tc.src, tc.v, tc.dst, err, tc.want)
		}
	}
	if len(s.List()) != 1 {
		t.Errorf("refused copies left replicas: %v", s.List())
	}
}

// TestCopyFailureLeavesNothing has the disk fail in the middle of a copy
// and crash during another: neither leaves a replica or a file behind.
func TestCopyFailureLeavesNothing(t *testing.T) {
	m := NewMemFS(1 << 30)
	s := openStore(t, m, "/d")
	s.Create(1, 1)
	s.Write(1, 0, randBytes(rand.New(rand.NewPCG(3, 3)), 40*BlockSize))
	before := files(m)
	m.SetFault(func(op, name string) error {
		if strings.Contains(name, ".incoming") && op == "write" {
			return errors.New("injected write failure")
		}
		return nil
	})
	if _, err := s.Copy(1, 1, 2); err == nil {
		t.Fatal("copy on a failing disk succeeded")
	}
	m.SetFault(nil)
	if _, err := s.Info(2); chunkfs.KindOf(err) != chunkfs.KindNotExist {
		t.Errorf("failed copy visible: %v", err)
	}
	if got := files(m); !slices.Equal(got, before) {
		t.Errorf("failed copy left files: %v, before %v", got, before)
	}
	if _, err := s.Copy(1, 1, 3); err != nil {
		t.Fatal(err)
	}
	m.Crash(0, 0) // the copy was fsynced before Copy returned: it stays
	s2 := openStore(t, m, "/d")
	if in, err := s2.Info(3); err != nil || in.Length != 40*BlockSize {
		t.Errorf("fsynced copy lost in a crash: %+v %v", in, err)
	}
}
