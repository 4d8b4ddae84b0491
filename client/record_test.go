package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/chunkfs/chunkfs"
)

func testID(n byte) RecordID {
	var id RecordID
	id[0], id[15] = 0xAB, n
	return id
}

func readAll(t *testing.T, r io.Reader, max int) []Record {
	t.Helper()
	rr := NewRecordReader(r, max)
	var out []Record
	for {
		rec, err := rr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		rec.Data = bytes.Clone(rec.Data)
		out = append(out, rec)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	var file bytes.Buffer
	want := [][]byte{[]byte("alpha"), {}, bytes.Repeat([]byte("x"), 300000), []byte("omega")}
	for i, p := range want {
		file.Write(frameRecord(testID(byte(i)), p))
	}
	got := readAll(t, iotest.OneByteReader(bytes.NewReader(file.Bytes())), 0)
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	var off int64
	for i := range want {
		if !bytes.Equal(got[i].Data, want[i]) || got[i].ID != testID(byte(i)) || got[i].Offset != off {
			t.Errorf("record %d: offset %d id %v len %d; want offset %d len %d", i, got[i].Offset, got[i].ID, len(got[i].Data), off, len(want[i]))
		}
		off += int64(RecordHeaderSize + len(want[i]))
	}
}

// TestRecordReaderSkips covers what record append leaves behind: zero
// padding, a torn fragment, a duplicate from a retry, garbage, and a torn
// record at the very end.
func TestRecordReaderSkips(t *testing.T) {
	var file bytes.Buffer
	a := frameRecord(testID(1), []byte("first"))
	b := frameRecord(testID(2), []byte("second record"))
	c := frameRecord(testID(3), []byte("third"))
	file.Write(a)
	file.Write(make([]byte, 1000))       // padding
	file.Write(b[:len(b)-4])             // torn fragment of b
	file.Write(b)                        // b retried
	file.Write(a)                        // a duplicate
	file.Write([]byte("\xC7RECgarbage")) // a false magic
	file.Write(c)
	file.Write(frameRecord(testID(4), []byte("torn at the end"))[:20])
	rr := NewRecordReader(&file, 1<<20)
	var got []string
	for {
		rec, err := rr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(rec.Data))
	}
	if fmt.Sprint(got) != "[first second record third]" {
		t.Fatalf("records = %q", got)
	}
	if rr.Skipped() == 0 {
		t.Error("Skipped() = 0, want the padding and fragments counted")
	}
}

func TestRecordReaderBoundsLength(t *testing.T) {
	big := frameRecord(testID(1), make([]byte, 100))
	small := frameRecord(testID(2), []byte("ok"))
	got := readAll(t, bytes.NewReader(append(big, small...)), 50)
	if len(got) != 1 || string(got[0].Data) != "ok" {
		t.Fatalf("got %v, want only the small record", got)
	}
}

func TestRecordReaderError(t *testing.T) {
	boom := errors.New("boom")
	rr := NewRecordReader(iotest.ErrReader(boom), 0)
	if _, err := rr.Next(); !errors.Is(err, boom) {
		t.Fatalf("Next = %v, want %v", err, boom)
	}
}

func TestCorruptFrameRejected(t *testing.T) {
	f := frameRecord(testID(1), []byte("payload"))
	for i := range f {
		g := bytes.Clone(f)
		g[i] ^= 0x01
		if _, _, _, ok := parseFrame(g, 1<<20); ok {
			t.Errorf("flipping byte %d still parses", i)
		}
	}
}

// FuzzRecordReader feeds arbitrary bytes to the reader: it must not panic,
// must make progress, and must return only frames that really are in the
// input.
func FuzzRecordReader(f *testing.F) {
	f.Add(frameRecord(testID(1), []byte("hello")))
	f.Add(append(make([]byte, 40), frameRecord(testID(2), []byte("x"))...))
	f.Add([]byte("\xC7REC\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rr := NewRecordReader(bytes.NewReader(data), 1<<16)
		seen := map[RecordID]bool{}
		for i := 0; ; i++ {
			rec, err := rr.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if seen[rec.ID] {
				t.Fatalf("duplicate ID %v returned", rec.ID)
			}
			seen[rec.ID] = true
			frame := frameRecord(rec.ID, rec.Data)
			if rec.Offset < 0 || rec.Offset+int64(len(frame)) > int64(len(data)) || !bytes.Equal(data[rec.Offset:rec.Offset+int64(len(frame))], frame) {
				t.Fatalf("record at %d is not in the input", rec.Offset)
			}
			if i > len(data) {
				t.Fatal("more records than bytes")
			}
		}
	})
}

// TestWriteChainKeepsMasterOrder checks that writers and appenders on
// different hosts push a chunk's data along the master's order (the chain
// it balanced) when the replicas are equidistant, that nearer replicas still
// come first, that the wire location is left alone, and that reads still
// spread ties per client.
func TestWriteChainKeepsMasterOrder(t *testing.T) {
	a := &nearness{local: []net.IP{net.ParseIP("10.9.0.1")}, seed: 1}
	b := &nearness{local: []net.IP{net.ParseIP("10.8.0.1")}, seed: 99}
	addrs := []string{"10.1.0.1:7001", "10.2.0.1:7001", "10.3.0.1:7001"}
	orig := slices.Clone(addrs)
	readFirsts := map[string]bool{}
	for h := range uint64(64) {
		cl := &chunkLoc{handle: chunkfs.Handle(h), replicas: addrs}
		ca, cb := a.locate(cl).replicas, b.locate(cl).replicas
		if !slices.Equal(ca, orig) || !slices.Equal(cb, orig) {
			t.Fatalf("chunk %d: chains %v and %v, want the master's %v", h, ca, cb, orig)
		}
		readFirsts[a.locateForReads(cl).replicas[0]] = true
	}
	if !slices.Equal(addrs, orig) {
		t.Errorf("locate reordered the wire location: %v", addrs)
	}
	if len(readFirsts) < 2 {
		t.Errorf("reads of every chunk start at the same replica: %v", readFirsts)
	}
	near := &nearness{local: []net.IP{net.ParseIP("10.3.0.9")}, seed: 5}
	if c := near.locate(&chunkLoc{replicas: addrs}).replicas; !slices.Equal(c, []string{"10.3.0.1:7001", "10.1.0.1:7001", "10.2.0.1:7001"}) {
		t.Errorf("chain %v: want the replica on this subnet first, then the master's order", c)
	}
}
