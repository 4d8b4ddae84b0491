package rpc

// The data stream: a lean framed protocol over TCP for bulk chunk data,
// beside gRPC on the same port (see Mux).
//
// A connection opens with the 4-byte StreamMagic, then carries requests one
// after another, each answered before the next is read. Every message is a
// frame:
//
//	type u8 | 0 u8 | 0 u16 | length u32 | CRC32C of the payload u32 | payload
//
// little-endian, with a payload of at most chunkfs.MaxFrameSize bytes.
//
// PUSH  client → replica: a push frame {data ID u64, length u64, n u8,
// n × (u8 length, address), [u8 length, token]} naming the rest of the
// chain and carrying the chunk access token (absent when there is none),
// then data frames carrying length bytes. The replica forwards each frame to the next address
// as soon as it has checked it (cut-through), keeps the data in its buffer,
// and answers with an ok frame once it and every replica after it hold the
// data, or an error frame. While the push lasts, every replica handling it
// sends a wait frame (empty) upstream every third of its frame timeout: on
// a congested network the data a hop has sent may take longer than a frame
// timeout to drain down the chain, and the wait frames tell the hop (or
// client) above that the chain is alive, so it waits for the answer as long
// as they keep coming, and a frame timeout after the last one.
//
// READ  client → replica: a read frame {handle u64, version u64, offset i64,
// length u32, [u8 length, token]} (the token absent when there is none);
// the replica answers with data frames of verified chunk data and an ok
// frame whose payload is one byte, 1 if the chunk ended before
// length bytes, or with an error frame {kind u8, message} at any point.
//
// A token is opaque here, at most MaxTokenLen bytes; the server's
// StreamConfig.Authorize decides on it before anything is read or kept,
// and a replica forwards a push with the token it came with. A frame
// without a token is the version-2 frame of before, so the magic stays.
//
// A push or read frame may end, after the token field, with the request ID
// of the operation it belongs to (internal/reqid): {u8 length, ID}, 1 to
// reqid.MaxLen bytes of [0-9A-Za-z._-]. The token field is then always
// there, of length 0 when there is no token. A frame without an ID is
// byte for byte the frame of before, and a replica forwards a push with
// the ID it came with. A malformed ID is a malformed frame: the
// connection is closed, as for any other field.
//
// BACKGROUND READ  a chunkserver cloning a chunk → its source: a
// background-read frame, with the payload and answer of a read. The
// source may pace its answer while it serves other reads
// (StreamConfig.BackgroundRate), so that repair leaves clients most of its
// NIC. A server of before knows no such frame and closes the connection:
// a clone from it fails until it is upgraded.
//
// URGENT READ  the same for a clone of a chunk whose source holds its one
// live replica: an urgent-read frame. The source never paces it, and
// while it runs paces its other reads (StreamConfig.YieldRate).
//
// A frame that breaks these rules (bad magic, unknown type, oversized
// length, bad checksum, unexpected type) closes the connection.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/checksum"
	"github.com/chunkfs/chunkfs/internal/reqid"
)

// StreamMagic opens every data-stream connection. Its last byte is the
// protocol's version: 2 added wait frames. A peer of another version is
// turned away at the first bytes (the mux logs them), not mid-request.
const StreamMagic = "CKD2"

// Stream limits.
const (
	frameHeaderSize = 12
	// MaxPushSize bounds the data of one push.
	MaxPushSize = 64 << 20
	// MaxReadSize bounds the length of one read request.
	MaxReadSize = 64 << 20
	maxAddrLen  = 255
	// MaxTokenLen bounds the chunk access token of a request.
	MaxTokenLen = 255
	// readBuffer is the read buffer of a stream connection: enough for a
	// header and a little more. Payloads are read straight into their
	// destination (a Read into a slice larger than the buffer bypasses it
	// once it is empty), so what the buffer read past a header is copied
	// a second time: a small buffer keeps that to a few bytes per frame
	// (a 4 KiB one copied 4 KiB of every 64 KiB frame twice).
	readBuffer = 256
	maxErrMsg  = 1024
)

type frameType uint8

const (
	framePush frameType = iota + 1
	frameRead
	frameData
	frameOK
	frameError
	frameWait
	frameBackgroundRead
	frameUrgentRead
	frameTypeEnd
)

func (t frameType) String() string {
	switch t {
	case framePush:
		return "push"
	case frameRead:
		return "read"
	case frameData:
		return "data"
	case frameOK:
		return "ok"
	case frameError:
		return "error"
	case frameWait:
		return "wait"
	case frameBackgroundRead:
		return "background read"
	case frameUrgentRead:
		return "urgent read"
	}
	return fmt.Sprintf("frame type %d", uint8(t))
}

// errProtocol is returned for a frame that breaks the protocol; the
// connection it came on is closed.
type errProtocol struct {
	reason   string
	checksum bool // a payload failed its checksum
}

func (e *errProtocol) Error() string { return "data stream protocol error: " + e.reason }

func protocolError(format string, args ...any) error {
	return &errProtocol{reason: fmt.Sprintf(format, args...)}
}

// frameHeader is a decoded frame header.
type frameHeader struct {
	typ    frameType
	length int
	sum    uint32
}

func putHeader(b []byte, t frameType, length int, sum uint32) {
	b[0], b[1], b[2], b[3] = byte(t), 0, 0, 0
	binary.LittleEndian.PutUint32(b[4:], uint32(length))
	binary.LittleEndian.PutUint32(b[8:], sum)
}

// parseHeader decodes and checks a frame header.
func parseHeader(b []byte) (frameHeader, error) {
	h := frameHeader{typ: frameType(b[0]), length: int(binary.LittleEndian.Uint32(b[4:])), sum: binary.LittleEndian.Uint32(b[8:])}
	switch {
	case h.typ == 0 || h.typ >= frameTypeEnd:
		return h, protocolError("unknown frame type %d", b[0])
	case b[1] != 0 || b[2] != 0 || b[3] != 0:
		return h, protocolError("reserved header bytes not zero")
	case h.length > chunkfs.MaxFrameSize:
		return h, protocolError("frame of %d bytes exceeds %d", h.length, chunkfs.MaxFrameSize)
	}
	return h, nil
}

// readHeader reads one frame header.
func readHeader(r io.Reader, buf []byte) (frameHeader, error) {
	if _, err := io.ReadFull(r, buf[:frameHeaderSize]); err != nil {
		return frameHeader{}, err
	}
	return parseHeader(buf)
}

// readPayload reads h's payload into p (len(p) == h.length) and checks it.
func readPayload(r io.Reader, h frameHeader, p []byte) error {
	if _, err := io.ReadFull(r, p); err != nil {
		return err
	}
	if checksum.Sum(p) != h.sum {
		return &errProtocol{reason: h.typ.String() + " frame fails its checksum", checksum: true}
	}
	return nil
}

// frame appends a whole frame to b.
func appendFrame(b []byte, t frameType, payload []byte) []byte {
	var hdr [frameHeaderSize]byte
	putHeader(hdr[:], t, len(payload), checksum.Sum(payload))
	return append(append(b, hdr[:]...), payload...)
}

// pushRequest is the payload of a push frame.
type pushRequest struct {
	id     chunkfs.DataID
	length int64
	chain  []string // replicas after the receiver
	token  []byte   // chunk access token; nil when none
	reqID  string   // the operation's request ID; "" when none
}

// appendToken appends the optional token field: nothing when tok is
// empty. Callers check it is at most MaxTokenLen bytes (checkToken).
func appendToken(b, tok []byte) []byte {
	if len(tok) == 0 {
		return b
	}
	return append(append(b, byte(len(tok))), tok...)
}

func checkToken(op string, tok []byte) error {
	if len(tok) > MaxTokenLen {
		return chunkfs.E(op, "", chunkfs.KindInvalid, "token too long")
	}
	return nil
}

// decodeToken decodes the optional token field, which must end b.
func decodeToken(op string, b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if n := int(b[0]); n == 0 || len(b) != 1+n {
		return nil, protocolError("bad token in %s frame", op)
	}
	return append([]byte(nil), b[1:]...), nil
}

// appendTail appends a request's optional fields: the token, then the
// request ID, the token field written (empty) whenever an ID follows.
func appendTail(b, tok []byte, id string) []byte {
	if id == "" {
		return appendToken(b, tok)
	}
	b = append(append(b, byte(len(tok))), tok...)
	return append(append(b, byte(len(id))), id...)
}

func checkTail(op string, tok []byte, id string) error {
	if id != "" && !reqid.Valid(id) {
		return chunkfs.E(op, "", chunkfs.KindInvalid, "malformed request ID")
	}
	return checkToken(op, tok)
}

// decodeTail decodes the optional token and request ID fields, which must
// end b.
func decodeTail(op string, b []byte) ([]byte, string, error) {
	if len(b) == 0 {
		return nil, "", nil
	}
	n := int(b[0])
	if len(b) < 1+n {
		return nil, "", protocolError("bad token in %s frame", op)
	}
	rest := b[1+n:]
	if len(rest) == 0 {
		tok, err := decodeToken(op, b)
		return tok, "", err
	}
	if m := int(rest[0]); len(rest) != 1+m || !reqid.Valid(string(rest[1:])) {
		return nil, "", protocolError("bad request ID in %s frame", op)
	}
	var tok []byte
	if n > 0 {
		tok = append(tok, b[1:1+n]...)
	}
	return tok, string(rest[1:]), nil
}

func (p *pushRequest) encode() ([]byte, error) {
	if len(p.chain) > chunkfs.MaxReplication {
		return nil, chunkfs.E("push", "", chunkfs.KindInvalid, "chain too long")
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(p.id))
	b = binary.LittleEndian.AppendUint64(b, uint64(p.length))
	b = append(b, byte(len(p.chain)))
	for _, a := range p.chain {
		if len(a) == 0 || len(a) > maxAddrLen {
			return nil, chunkfs.E("push", a, chunkfs.KindInvalid, "bad replica address")
		}
		b = append(append(b, byte(len(a))), a...)
	}
	if err := checkTail("push", p.token, p.reqID); err != nil {
		return nil, err
	}
	return appendTail(b, p.token, p.reqID), nil
}

func decodePush(b []byte) (*pushRequest, error) {
	if len(b) < 17 {
		return nil, protocolError("short push frame")
	}
	p := &pushRequest{id: chunkfs.DataID(binary.LittleEndian.Uint64(b)), length: int64(binary.LittleEndian.Uint64(b[8:]))}
	if p.length < 0 || p.length > MaxPushSize {
		return nil, protocolError("push of %d bytes exceeds %d", p.length, MaxPushSize)
	}
	n := int(b[16])
	if n > chunkfs.MaxReplication {
		return nil, protocolError("push chain of %d replicas", n)
	}
	b = b[17:]
	for range n {
		if len(b) < 1 || int(b[0]) == 0 || len(b) < 1+int(b[0]) {
			return nil, protocolError("bad push chain")
		}
		p.chain = append(p.chain, string(b[1:1+b[0]]))
		b = b[1+b[0]:]
	}
	tok, id, err := decodeTail("push", b)
	if err != nil {
		return nil, err
	}
	p.token, p.reqID = tok, id
	return p, nil
}

// readRequest is the payload of a read frame.
type readRequest struct {
	handle  chunkfs.Handle
	version chunkfs.Version
	off     int64
	length  int
	token   []byte // chunk access token; nil when none
	reqID   string // the operation's request ID; "" when none
	// class marks a clone's read, sent as a background-read or an
	// urgent-read frame (the payload does not carry it).
	class readClass
}

// frame returns the type of frame r is sent in.
func (r *readRequest) frame() frameType {
	switch r.class {
	case backgroundRead:
		return frameBackgroundRead
	case urgentRead:
		return frameUrgentRead
	}
	return frameRead
}

// readFixed is the length of a read frame without its token.
const readFixed = 28

// encode encodes r, whose token and request ID pass checkTail.
func (r *readRequest) encode() []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(r.handle))
	b = binary.LittleEndian.AppendUint64(b, uint64(r.version))
	b = binary.LittleEndian.AppendUint64(b, uint64(r.off))
	b = binary.LittleEndian.AppendUint32(b, uint32(r.length))
	return appendTail(b, r.token, r.reqID)
}

func decodeRead(b []byte) (*readRequest, error) {
	if len(b) < readFixed {
		return nil, protocolError("read frame of %d bytes", len(b))
	}
	tok, id, err := decodeTail("read", b[readFixed:])
	if err != nil {
		return nil, err
	}
	r := &readRequest{
		handle:  chunkfs.Handle(binary.LittleEndian.Uint64(b)),
		version: chunkfs.Version(binary.LittleEndian.Uint64(b[8:])),
		off:     int64(binary.LittleEndian.Uint64(b[16:])),
		length:  int(binary.LittleEndian.Uint32(b[24:])),
		token:   tok,
		reqID:   id,
	}
	if r.off < 0 || r.length > MaxReadSize {
		return nil, protocolError("read of %d bytes at %d", r.length, r.off)
	}
	return r, nil
}

// encodeError is the payload of an error frame.
func encodeError(err error) []byte {
	k := chunkfs.KindOf(err)
	msg := err.Error()
	var e *chunkfs.Error
	if errors.As(err, &e) && e.Err != nil {
		msg = e.Err.Error()
	}
	if len(msg) > maxErrMsg {
		msg = msg[:maxErrMsg]
	}
	return append([]byte{byte(k)}, msg...)
}

func decodeError(op, path string, b []byte) error {
	if len(b) < 1 || len(b) > 1+maxErrMsg {
		return protocolError("bad error frame")
	}
	k := chunkfs.Kind(b[0])
	if !k.Valid() {
		k = chunkfs.KindOther
	}
	var inner error
	if len(b) > 1 {
		inner = errors.New(string(b[1:]))
	}
	return &chunkfs.Error{Op: op, Path: path, Kind: k, Err: inner}
}
