package client

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"

	"github.com/chunkfs/chunkfs"
)

// Record framing. File.Append writes each record as one frame:
//
//	magic    4 bytes  0xC7 'R' 'E' 'C'
//	length   4 bytes  payload length, little endian
//	id      16 bytes  unique record ID (writer ID + sequence number)
//	crc      4 bytes  CRC32C of length, id and payload, little endian
//	payload  length bytes
//
// Record append is at-least-once and a failed attempt may leave a torn
// fragment on some replicas, and the primary pads a chunk with zeros when a
// record does not fit. The CRC lets RecordReader tell a frame from padding or
// a fragment, and the ID lets it drop the duplicates that retries create.
const (
	// RecordHeaderSize is the framing overhead of one record.
	RecordHeaderSize = 28
	// DefaultMaxRecord bounds a record's payload when a reader is given no
	// other bound: a quarter of the default chunk size.
	DefaultMaxRecord = chunkfs.DefaultChunkSize / 4
)

var recordMagic = [4]byte{0xC7, 'R', 'E', 'C'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// RecordID uniquely names a record: the appending writer's random ID and
// that writer's sequence number.
type RecordID [16]byte

// String returns the ID in hexadecimal.
func (id RecordID) String() string { return hex.EncodeToString(id[:]) }

// Record is one record read back by a RecordReader.
type Record struct {
	Offset int64    // offset of the frame in the file
	ID     RecordID // unique ID given when it was appended
	Data   []byte   // payload; valid until the next call to Next
}

// frameRecord returns the frame of payload p with the given ID.
func frameRecord(id RecordID, p []byte) []byte {
	b := make([]byte, RecordHeaderSize+len(p))
	copy(b[0:4], recordMagic[:])
	binary.LittleEndian.PutUint32(b[4:8], uint32(len(p)))
	copy(b[8:24], id[:])
	copy(b[RecordHeaderSize:], p)
	binary.LittleEndian.PutUint32(b[24:28], frameCRC(b[4:24], p))
	return b
}

func frameCRC(lengthAndID, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, lengthAndID)
	return crc32.Update(c, castagnoli, payload)
}

// parseFrame checks whether b starts with a whole, valid frame of at most
// max payload bytes. need > 0 means b is too short to tell and need bytes are
// wanted; ok reports a valid frame of total size RecordHeaderSize+len(payload).
func parseFrame(b []byte, max int) (id RecordID, payload []byte, need int, ok bool) {
	if len(b) < RecordHeaderSize {
		return id, nil, RecordHeaderSize, false
	}
	if !bytes.Equal(b[0:4], recordMagic[:]) {
		return id, nil, 0, false
	}
	n := binary.LittleEndian.Uint32(b[4:8])
	if uint64(n) > uint64(max) {
		return id, nil, 0, false
	}
	total := RecordHeaderSize + int(n)
	if len(b) < total {
		return id, nil, total, false
	}
	payload = b[RecordHeaderSize:total]
	if binary.LittleEndian.Uint32(b[24:28]) != frameCRC(b[4:24], payload) {
		return id, nil, 0, false
	}
	copy(id[:], b[8:24])
	return id, payload, 0, true
}

// RecordReader reads the records of a record-append file, each exactly once:
// it skips padding, torn fragments and anything else that is not a valid
// frame, and drops records whose ID it has already returned (it remembers
// every ID it has seen, 16 bytes each).
type RecordReader struct {
	r          io.Reader
	max        int
	buf        []byte // buffered input; buf[start:end] is unread
	start, end int
	off        int64 // file offset of buf[start]
	err        error // sticky error from r
	seen       map[RecordID]struct{}
	skipped    int64
}

// NewRecordReader returns a reader of the records in r, which should read a
// record-append file from its start. maxRecord bounds a payload (0 means
// DefaultMaxRecord); larger length fields are treated as garbage.
func NewRecordReader(r io.Reader, maxRecord int) *RecordReader {
	if maxRecord <= 0 {
		maxRecord = DefaultMaxRecord
	}
	return &RecordReader{r: r, max: maxRecord, seen: make(map[RecordID]struct{})}
}

// Skipped returns how many bytes so far were padding, fragments or duplicates.
func (rr *RecordReader) Skipped() int64 { return rr.skipped }

// Next returns the next record not returned before, or io.EOF at the end.
func (rr *RecordReader) Next() (Record, error) {
	for {
		if err := rr.fill(RecordHeaderSize); err != nil {
			rr.discard(rr.end - rr.start)
			return Record{}, err
		}
		if !rr.seekMagic() {
			continue
		}
		rec, ok, err := rr.tryFrame()
		if err != nil {
			return Record{}, err
		}
		if !ok {
			rr.discard(1)
			continue
		}
		if _, dup := rr.seen[rec.ID]; dup {
			rr.skipped += int64(RecordHeaderSize + len(rec.Data))
			continue
		}
		rr.seen[rec.ID] = struct{}{}
		return rec, nil
	}
}

// seekMagic advances to the next occurrence of the magic in the buffer and
// reports whether one was found; otherwise it discards what cannot start one.
func (rr *RecordReader) seekMagic() bool {
	window := rr.buf[rr.start:rr.end]
	i := bytes.Index(window, recordMagic[:])
	if i < 0 {
		rr.discard(len(window) - (len(recordMagic) - 1))
		return false
	}
	rr.discard(i)
	return true
}

// tryFrame parses a frame at the read position, consuming it when valid.
func (rr *RecordReader) tryFrame() (Record, bool, error) {
	for {
		id, payload, need, ok := parseFrame(rr.buf[rr.start:rr.end], rr.max)
		if ok {
			rec := Record{Offset: rr.off, ID: id, Data: payload}
			n := RecordHeaderSize + len(payload)
			rr.start += n
			rr.off += int64(n)
			return rec, true, nil
		}
		if need == 0 {
			return Record{}, false, nil
		}
		if err := rr.fill(need); err != nil {
			if err == io.EOF {
				return Record{}, false, nil // a torn fragment at the end
			}
			return Record{}, false, err
		}
	}
}

// discard drops n unread bytes as skipped.
func (rr *RecordReader) discard(n int) {
	if n <= 0 {
		return
	}
	rr.start += n
	rr.off += int64(n)
	rr.skipped += int64(n)
}

// fill makes at least n bytes available unless the input ends first, in which
// case it returns io.EOF (or the reader's error) with fewer available.
func (rr *RecordReader) fill(n int) error {
	if rr.end-rr.start >= n {
		return nil
	}
	rr.compact(n)
	for empty := 0; rr.end-rr.start < n; {
		if rr.err != nil {
			return rr.err
		}
		m, err := rr.r.Read(rr.buf[rr.end:])
		rr.end += m
		if m == 0 && err == nil {
			if empty++; empty > 100 {
				rr.err = io.ErrNoProgress
			}
		}
		if err != nil {
			rr.err = err
			if errors.Is(err, io.ErrUnexpectedEOF) {
				rr.err = io.EOF
			}
		}
	}
	return nil
}

// compact moves unread bytes to the front and grows the buffer to hold n.
func (rr *RecordReader) compact(n int) {
	const minBuf = 256 << 10
	size := max(minBuf, len(rr.buf))
	for size < n {
		size *= 2
	}
	if size != len(rr.buf) {
		nb := make([]byte, size)
		rr.end = copy(nb, rr.buf[rr.start:rr.end])
		rr.buf, rr.start = nb, 0
		return
	}
	rr.end = copy(rr.buf, rr.buf[rr.start:rr.end])
	rr.start = 0
}

// StartsWithRecord reports whether r, read from offset 0, begins with a
// whole, valid record frame of at most maxRecord payload bytes (0 means
// DefaultMaxRecord): whether it looks like a file written by record append.
func StartsWithRecord(r io.ReaderAt, maxRecord int) (bool, error) {
	if maxRecord <= 0 {
		maxRecord = DefaultMaxRecord
	}
	hdr := make([]byte, RecordHeaderSize)
	if n, err := r.ReadAt(hdr, 0); n < len(hdr) {
		if err == io.EOF {
			err = nil
		}
		return false, err
	}
	_, _, need, ok := parseFrame(hdr, maxRecord)
	if ok || need == 0 {
		return ok, nil
	}
	frame := make([]byte, need)
	if n, err := r.ReadAt(frame, 0); n < need {
		if err == io.EOF {
			err = nil
		}
		return false, err
	}
	_, _, _, ok = parseFrame(frame, maxRecord)
	return ok, nil
}
