package rpc

import (
	"github.com/chunkfs/chunkfs/internal/checksum"
)

// Receiving a read's answer.
//
// A server sends the data of a read in frames that end on checksum-block
// boundaries of the chunk (sendFrames), so the client knows where each
// frame of a full answer will start and how long it will be. It therefore
// reads the answer with scatter reads (readv) laid out as that answer:
// the rest of the current frame's payload into its place in the caller's
// buffer, the next header into a header slot, the next payload into its
// place, and so on, up to maxScatter bytes per call. One system call then
// takes everything the socket holds, instead of two or more per 64 KiB
// frame, and no byte is copied twice. Each header is checked against the
// layout as it completes and each payload against its header's checksum;
// a frame that is not what the layout expects (the chunk ended, an error,
// a server framing otherwise) stops the scatter reads, and whatever they
// read past that header is replayed, from a side buffer, to the ordinary
// frame-by-frame reader, which finishes the answer.

// maxScatter bounds the payload bytes one scatter read asks for: enough to
// empty a socket's queue in one call, few enough that the frames are still
// in cache when they are checked.
const maxScatter = 512 << 10

// maxScatterFrames bounds the frames of one scatter read.
const maxScatterFrames = maxScatter/checksum.BlockSize + 2

// scatter is the state of a connection's scatter reads, kept between
// answers.
type scatter struct {
	iov   []iovec
	segs  []scatterSeg // iov's segments, empty ones included
	slots [maxScatterFrames + 1][frameHeaderSize]byte
	part  [frameHeaderSize]byte // the header being read
}

// scatterSeg is a segment of a scatter read: a frame's payload in the
// caller's buffer, or a header slot with the length of the data frame the
// layout expects it to announce (0: the answer's end).
type scatterSeg struct {
	buf  []byte
	hdr  bool
	want int
}

// receiveScatter receives the answer to a read of len(p) bytes at chunk
// offset off into p with scatter reads until the answer ends or differs
// from the expected layout. It returns how many bytes of p it filled and
// checked, the header of the frame that comes next (its payload not read
// yet), and the bytes the reads took past that header, to be read before
// the connection's.
func (dc *dataConn) receiveScatter(p []byte, off int64) (n int, next frameHeader, rest []byte, err error) {
	sc := dc.sc
	if sc == nil {
		sc = &scatter{}
		dc.sc = sc
	}
	defer func() { // drop the references to p
		clear(sc.iov)
		clear(sc.segs)
	}()
	want := func(pos int) int { // the length of the data frame at pos
		if pos >= len(p) {
			return 0
		}
		return min(frameLen(off+int64(pos)), len(p)-pos)
	}
	var cur frameHeader // the frame being received, when got >= 0
	got := -1           // its payload bytes received; -1: reading its header
	hgot := 0           // bytes of sc.part read
	for {
		// Lay out the next read: the current frame's rest, then frames
		// of the expected lengths, each header in a slot of its own.
		sc.segs = sc.segs[:0]
		pos := n
		if got >= 0 {
			sc.segs = append(sc.segs, scatterSeg{buf: p[n+got : n+cur.length]})
			pos += cur.length
			sc.segs = append(sc.segs, scatterSeg{buf: sc.slots[0][:], hdr: true, want: want(pos)})
		} else {
			sc.segs = append(sc.segs, scatterSeg{buf: sc.part[hgot:], hdr: true, want: want(pos)})
		}
		for slot := 1; pos < len(p) && pos-n < maxScatter && slot <= maxScatterFrames; slot++ {
			l := want(pos)
			sc.segs = append(sc.segs, scatterSeg{buf: p[pos : pos+l]})
			pos += l
			sc.segs = append(sc.segs, scatterSeg{buf: sc.slots[slot][:], hdr: true, want: want(pos)})
		}
		sc.iov = sc.iov[:0]
		for _, s := range sc.segs {
			if len(s.buf) > 0 {
				sc.iov = append(sc.iov, iovecOf(s.buf))
			}
		}
		k, err := readv(dc.raw, sc.iov)
		if err != nil {
			return n, next, nil, err
		}
		// Take the segments it filled, in order.
		for i, s := range sc.segs {
			if k == 0 {
				break
			}
			m := min(k, len(s.buf))
			k -= m
			if !s.hdr {
				if got += m; got < cur.length {
					continue // k is 0
				}
				if checksum.Sum(p[n:n+cur.length]) != cur.sum {
					return n, next, nil, &errProtocol{reason: "data frame fails its checksum", checksum: true}
				}
				n += cur.length
				got = -1
				continue
			}
			if i == 0 && got < 0 {
				hgot += m // the slot was sc.part[hgot:]
			} else {
				hgot = copy(sc.part[:], s.buf[:m])
			}
			if hgot < frameHeaderSize {
				continue // k is 0
			}
			hgot = 0
			h, err := parseHeader(sc.part[:])
			if err != nil {
				return n, next, nil, err
			}
			if h.typ != frameData || s.want == 0 || h.length != s.want {
				// Not the layout's frame: hand it and what follows to
				// the frame-by-frame reader.
				for _, t := range sc.segs[i+1:] {
					c := min(k, len(t.buf))
					rest = append(rest, t.buf[:c]...)
					k -= c
				}
				return n, h, rest, nil
			}
			cur, got = h, 0
		}
	}
}
