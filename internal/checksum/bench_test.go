package checksum

import "testing"

func BenchmarkSumBlock(b *testing.B) {
	p := make([]byte, BlockSize)
	b.SetBytes(BlockSize)
	for range b.N {
		Sum(p)
	}
}
