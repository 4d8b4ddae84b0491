package checksum

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/chunkfs/chunkfs"
)

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

func TestSumIsCastagnoli(t *testing.T) {
	p := []byte("123456789")
	if got, want := Sum(p), uint32(0xe3069283); got != want {
		t.Fatalf("Sum = %#x, want %#x (CRC32C check value)", got, want)
	}
	if Sum(p) != crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatal("Sum differs from hash/crc32")
	}
}

func TestUpdateExtends(t *testing.T) {
	p := randBytes(3*BlockSize/2, 1)
	if Update(Sum(p[:1000]), p[1000:]) != Sum(p) {
		t.Fatal("Update(Sum(a), b) != Sum(a+b)")
	}
	z := make([]byte, 70000)
	copy(z, p[:10])
	if Zeros(Sum(p[:10]), 70000-10) != Sum(z) {
		t.Fatal("Zeros does not extend with zero bytes")
	}
	if ZeroBlock != Sum(make([]byte, BlockSize)) {
		t.Fatal("ZeroBlock wrong")
	}
}

func TestBlocksAndVerify(t *testing.T) {
	p := randBytes(2*BlockSize+5, 2)
	sums := Blocks(nil, p)
	if len(sums) != 3 || NumBlocks(int64(len(p))) != 3 {
		t.Fatalf("got %d sums, NumBlocks %d; want 3", len(sums), NumBlocks(int64(len(p))))
	}
	if err := Verify(p, sums); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	p[BlockSize+7] ^= 1
	err := Verify(p, sums)
	if !errors.Is(err, ErrChecksum) || !errors.Is(err, chunkfs.ErrChecksum) || chunkfs.KindOf(err) != chunkfs.KindChecksum {
		t.Fatalf("flipped byte: Verify = %v, want ErrChecksum of KindChecksum", err)
	}
	if Verify(p[:10], nil) != ErrChecksum {
		t.Fatal("missing sums accepted")
	}
}

func TestReaderGood(t *testing.T) {
	for _, n := range []int{0, 1, BlockSize - 1, BlockSize, BlockSize + 1, 3*BlockSize + 17} {
		p := randBytes(n, uint64(n))
		got, err := io.ReadAll(iotest.OneByteReader(NewReader(bytes.NewReader(p), Blocks(nil, p))))
		if err != nil || !bytes.Equal(got, p) {
			t.Errorf("n=%d: ReadAll = %d bytes, %v", n, len(got), err)
		}
	}
}

func TestReaderHoldsBackBadBlock(t *testing.T) {
	p := randBytes(3*BlockSize, 3)
	sums := Blocks(nil, p)
	p[2*BlockSize-1] ^= 0x80 // last byte of block 1
	got, err := io.ReadAll(NewReader(bytes.NewReader(p), sums))
	if err != ErrChecksum {
		t.Fatalf("err = %v, want ErrChecksum", err)
	}
	if len(got) != BlockSize {
		t.Fatalf("returned %d bytes, want only the first good block (%d)", len(got), BlockSize)
	}
	r := NewReader(bytes.NewReader(p), sums)
	io.ReadAll(r)
	if _, err := r.Read(make([]byte, 1)); err != ErrChecksum {
		t.Fatalf("error not sticky: %v", err)
	}
}

func TestReaderShort(t *testing.T) {
	p := randBytes(2*BlockSize, 4)
	sums := Blocks(nil, p)
	_, err := io.ReadAll(NewReader(bytes.NewReader(p[:BlockSize+10]), sums))
	if err != ErrChecksum {
		t.Fatalf("last block cut short: err = %v, want ErrChecksum", err)
	}
	_, err = io.ReadAll(NewReader(bytes.NewReader(p[:BlockSize-1]), sums))
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("short first block: err = %v, want ErrUnexpectedEOF", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("hello"), uint32(0), false)
	f.Add(randBytes(BlockSize+3, 5), uint32(7), true)
	f.Fuzz(func(t *testing.T, p []byte, flip uint32, corrupt bool) {
		sums := Blocks(nil, p)
		q := bytes.Clone(p)
		if corrupt && len(q) > 0 {
			q[int(flip)%len(q)] ^= 1
		}
		got, err := io.ReadAll(NewReader(bytes.NewReader(q), sums))
		if !corrupt || len(q) == 0 {
			if err != nil || !bytes.Equal(got, p) {
				t.Fatalf("clean data: %v", err)
			}
			return
		}
		if err != ErrChecksum {
			t.Fatalf("flipped byte: err = %v", err)
		}
		if !bytes.Equal(got, p[:len(got)]) || len(got)%BlockSize != 0 {
			t.Fatalf("returned %d unverified bytes", len(got))
		}
	})
}
