package chunkstore

import (
	"encoding/binary"
	"errors"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// The metadata file of a chunk, little-endian:
//
//	magic "CKM1" | handle u64 | version u64 | length i64 | n u32 |
//	n block checksums u32 | CRC32C of all the preceding bytes u32
//
// It is rewritten in place after every mutation. A torn rewrite fails its
// own checksum and the chunk is then reported corrupt.
const (
	metaMagic  = "CKM1"
	metaHeader = 4 + 8 + 8 + 8 + 4
)

// meta is the decoded metadata of a chunk.
type meta struct {
	handle  chunkfs.Handle
	version chunkfs.Version
	length  int64
	sums    []uint32
}

var errBadMeta = errors.New("chunkstore: bad metadata file")

func (m *meta) encode(buf []byte) []byte {
	buf = append(buf[:0], metaMagic...)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(m.handle))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(m.version))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(m.length))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(m.sums)))
	for _, s := range m.sums {
		buf = binary.LittleEndian.AppendUint32(buf, s)
	}
	return binary.LittleEndian.AppendUint32(buf, checksum.Sum(buf))
}

// decodeMeta parses a metadata file, refusing anything inconsistent or
// larger than maxLen bytes of chunk.
func decodeMeta(b []byte, maxLen int64) (*meta, error) {
	if len(b) < metaHeader+4 || string(b[:4]) != metaMagic {
		return nil, errBadMeta
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if checksum.Sum(body) != sum {
		return nil, errBadMeta
	}
	m := &meta{
		handle:  chunkfs.Handle(binary.LittleEndian.Uint64(b[4:])),
		version: chunkfs.Version(binary.LittleEndian.Uint64(b[12:])),
		length:  int64(binary.LittleEndian.Uint64(b[20:])),
	}
	n := int64(binary.LittleEndian.Uint32(b[28:]))
	if m.length < 0 || m.length > maxLen || n != checksum.NumBlocks(m.length) || int64(len(body)) != metaHeader+4*n {
		return nil, errBadMeta
	}
	m.sums = make([]uint32, n)
	for i := range m.sums {
		m.sums[i] = binary.LittleEndian.Uint32(b[metaHeader+4*i:])
	}
	return m, nil
}
