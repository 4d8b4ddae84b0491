package namespace

import (
	"encoding/binary"
	"fmt"
)

// reader reads this package's binary encodings, log commands and
// checkpoints, from memory. It treats its bytes as hostile: every read is
// bounded by what is left and every number by the limit its caller gives.
// The first error sticks and later reads return zero values, so a parser
// reads on and checks err once.
type reader struct {
	b    []byte
	what string // what is read, named in a truncation error: "command", "snapshot"
	err  error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// full returns the next n bytes, or nil if fewer are left.
func (r *reader) full(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("truncated %s", r.what)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if v := r.full(1); v != nil {
		return v[0]
	}
	return 0
}

// uvarint reads an unsigned varint no greater than limit.
func (r *reader) uvarint(limit uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	if v > limit {
		r.fail("value %d above limit %d", v, limit)
		return 0
	}
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// string reads a length-prefixed string of at most limit bytes.
func (r *reader) string(limit int) string {
	return string(r.full(int(r.uvarint(uint64(limit)))))
}

// left is the number of bytes not read yet.
func (r *reader) left() int { return len(r.b) }
