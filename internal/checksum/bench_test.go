package checksum

import "testing"

// BenchmarkSumBlock sums one 64 KiB block, hot in cache.
func BenchmarkSumBlock(b *testing.B) {
	p := make([]byte, BlockSize)
	b.SetBytes(BlockSize)
	for range b.N {
		Sum(p)
	}
}

// BenchmarkBlocks64MiB sums a 64 MiB chunk block by block: data mostly
// out of cache, as on the data path.
func BenchmarkBlocks64MiB(b *testing.B) {
	p := make([]byte, 64<<20)
	for i := range p {
		p[i] = byte(i)
	}
	sums := make([]uint32, 0, 1024)
	b.SetBytes(int64(len(p)))
	for range b.N {
		sums = Blocks(sums[:0], p)
	}
}

// BenchmarkCopy64MiB copies a 64 MiB chunk, to compare with Blocks64MiB.
func BenchmarkCopy64MiB(b *testing.B) {
	p, q := make([]byte, 64<<20), make([]byte, 64<<20)
	b.SetBytes(int64(len(p)))
	for range b.N {
		copy(q, p)
	}
}
