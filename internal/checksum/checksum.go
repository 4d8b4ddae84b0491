// Package checksum computes the CRC32C (Castagnoli) checksums that guard
// chunk data: one per 64 KiB block of a chunk (chunkfs.BlockSize) and one per
// frame of the data stream. It is pure: no disk, no network, no clock.
//
// Reader verifies data block by block as it is read, in the style of
// hash/crc32 and archive/zip: no byte of a block is returned before the whole
// block has passed its checksum, and the first failure is sticky.
package checksum

import (
	"errors"
	"hash/crc32"
	"io"

	"github.com/chunkfs/chunkfs"
)

// BlockSize is the unit of checksumming, chunkfs.BlockSize.
const BlockSize = chunkfs.BlockSize

// ErrChecksum is returned when data does not match its checksum. It is a
// *chunkfs.Error of KindChecksum, so errors.Is(err, chunkfs.ErrChecksum)
// holds and the kind crosses RPC.
var ErrChecksum = &chunkfs.Error{Op: "checksum", Kind: chunkfs.KindChecksum, Err: chunkfs.ErrChecksum}

var table = crc32.MakeTable(crc32.Castagnoli)

// Sum returns the CRC32C of p.
func Sum(p []byte) uint32 { return crc32.Checksum(p, table) }

// Update returns the CRC32C of the data whose CRC32C is crc followed by p.
// It extends a partial block's checksum when data is appended to it.
func Update(crc uint32, p []byte) uint32 { return crc32.Update(crc, table, p) }

// NumBlocks returns the number of blocks that n bytes span.
func NumBlocks(n int64) int64 { return (n + BlockSize - 1) / BlockSize }

// Blocks appends to sums the checksum of each BlockSize block of p (the last
// may be short) and returns the extended slice.
func Blocks(sums []uint32, p []byte) []uint32 {
	for len(p) > 0 {
		n := min(len(p), BlockSize)
		sums = append(sums, Sum(p[:n]))
		p = p[n:]
	}
	return sums
}

// Verify checks each BlockSize block of p against sums[0], sums[1], ... and
// returns ErrChecksum on the first mismatch or when sums is too short.
func Verify(p []byte, sums []uint32) error {
	for i := 0; len(p) > 0; i++ {
		n := min(len(p), BlockSize)
		if i >= len(sums) || Sum(p[:n]) != sums[i] {
			return ErrChecksum
		}
		p = p[n:]
	}
	return nil
}

var zeroBlock [BlockSize]byte

// ZeroBlock is the checksum of a whole block of zeros.
var ZeroBlock = Sum(zeroBlock[:])

// Zeros returns the CRC32C of n zero bytes following data whose CRC32C is crc.
func Zeros(crc uint32, n int) uint32 {
	for n > 0 {
		k := min(n, BlockSize)
		crc = Update(crc, zeroBlock[:k])
		n -= k
	}
	return crc
}

// Reader verifies the data read from an underlying reader against a list of
// per-block checksums. Each block is read whole and checked before any of it
// is returned. Errors are sticky.
type Reader struct {
	r    io.Reader
	sums []uint32 // checksums of the blocks not yet read
	buf  []byte   // current verified block
	off  int      // read position in buf
	err  error    // sticky error
}

// NewReader returns a Reader of r, whose data is len(sums) blocks of
// BlockSize bytes except that the last may be short.
func NewReader(r io.Reader, sums []uint32) *Reader {
	return &Reader{r: r, sums: sums}
}

// Read reads verified data. It returns ErrChecksum when a block does not
// match its checksum, and io.ErrUnexpectedEOF when the data ends before a
// block (other than the last) is whole or before every block has been read.
func (z *Reader) Read(p []byte) (int, error) {
	if z.off == len(z.buf) && z.err == nil {
		z.err = z.fill()
	}
	if z.off == len(z.buf) {
		return 0, z.err
	}
	n := copy(p, z.buf[z.off:])
	z.off += n
	return n, nil
}

// fill reads and verifies the next block into buf.
func (z *Reader) fill() error {
	if len(z.sums) == 0 {
		return io.EOF
	}
	if z.buf == nil {
		z.buf = make([]byte, BlockSize)
	}
	z.buf = z.buf[:BlockSize]
	n, err := io.ReadFull(z.r, z.buf)
	z.buf, z.off = z.buf[:n], 0
	last := len(z.sums) == 1
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) && last, err == nil:
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		z.buf = z.buf[:0]
		return io.ErrUnexpectedEOF
	default:
		z.buf = z.buf[:0]
		return err
	}
	if Sum(z.buf) != z.sums[0] {
		z.buf = z.buf[:0]
		return ErrChecksum
	}
	z.sums = z.sums[1:]
	return nil
}
