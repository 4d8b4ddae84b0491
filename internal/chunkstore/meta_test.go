package chunkstore

import (
	"testing"

	"github.com/chunkfs/chunkfs"
)

func TestMetaRoundTrip(t *testing.T) {
	m := meta{handle: 3, version: 9, length: BlockSize + 1, sums: []uint32{1, 2}}
	got, err := decodeMeta(m.encode(nil), 1<<20)
	if err != nil || got.handle != 3 || got.version != 9 || got.length != BlockSize+1 || len(got.sums) != 2 || got.sums[1] != 2 {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	b := m.encode(nil)
	b[10] ^= 1
	if _, err := decodeMeta(b, 1<<20); err == nil {
		t.Fatal("flipped byte accepted")
	}
	if _, err := decodeMeta(m.encode(nil), BlockSize); err == nil {
		t.Fatal("length over the limit accepted")
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add((&meta{handle: 1, version: 2, length: 5, sums: []uint32{7}}).encode(nil))
	f.Add([]byte("CKM1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b, 1<<30)
		if err != nil {
			return
		}
		if int64(len(m.sums)) != (m.length+BlockSize-1)/BlockSize || m.length < 0 {
			t.Fatalf("inconsistent meta accepted: %+v", m)
		}
		if string(m.encode(nil)) != string(b) {
			t.Fatal("accepted meta does not re-encode to itself")
		}
		_ = chunkfs.Handle(m.handle)
	})
}
