package namespace

import (
	"bytes"
	"math/bits"
	"reflect"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs"
)

var allFlags = []uint16{
	FlagParents, FlagExclusive, FlagTruncate, FlagNoReplace, FlagRecursive,
	FlagDirOnly, FlagFileOnly, FlagAppend, FlagTouch, FlagTimesNow,
	FlagExchange, FlagFirstChunk, FlagSafeModeEnter,
}

// v1Commands are commands as encoding 1 wrote them into logs, byte for
// byte, with the command each must still decode to. Where a flag shared a
// bit with another, the op decides which it is.
var v1Commands = []struct {
	bytes []byte
	want  Command
}{
	{[]byte{1, 2, 0x01, 0, 0x04, 2, '/', 'a'}, Command{Op: OpMkdir, Path: "/a", Flags: FlagParents}},
	{[]byte{1, 3, 0x80, 0, 0x04, 2, '/', 'a'}, Command{Op: OpCreate, Path: "/a", Flags: FlagFirstChunk}},
	{[]byte{1, 3, 0x86, 0, 0x04, 2, '/', 'a'}, Command{Op: OpCreate, Path: "/a", Flags: FlagExclusive | FlagTruncate | FlagFirstChunk}},
	{[]byte{1, 4, 0x10, 0, 0x0c, 2, '/', 'a', 2, '/', 'b'}, Command{Op: OpRename, Path: "/a", Target: "/b", Flags: FlagExchange}},
	{[]byte{1, 4, 0x08, 0, 0x0c, 2, '/', 'a', 2, '/', 'b'}, Command{Op: OpRename, Path: "/a", Target: "/b", Flags: FlagNoReplace}},
	{[]byte{1, 5, 0x10, 0, 0x04, 2, '/', 'a'}, Command{Op: OpDelete, Path: "/a", Flags: FlagRecursive}},
	{[]byte{1, 5, 0x60, 0, 0x04, 2, '/', 'a'}, Command{Op: OpDelete, Path: "/a", Flags: FlagDirOnly | FlagFileOnly}},
	{[]byte{1, 6, 0x01, 0x18, 0x04, 2, '/', 'a'}, Command{Op: OpSetAttr, Path: "/a", Set: SetATime | SetMTime, Flags: FlagTimesNow}},
	{[]byte{1, 7, 0x80, 0, 0x84, 0x08, 2, '/', 'a', 0x02}, Command{Op: OpAllocChunk, Path: "/a", Index: 1, Flags: FlagAppend}},
	{[]byte{1, 9, 0x01, 0, 0x84, 0x08, 2, '/', 'a', 0x0a}, Command{Op: OpCommitLength, Path: "/a", Length: 5, Flags: FlagTouch}},
	{[]byte{1, 20, 0x10, 0, 0x04, 2, '/', 'a'}, Command{Op: OpTrash, Path: "/a", Flags: FlagRecursive}},
	{[]byte{1, 21, 0x01, 0, 0x04, 2, '/', 'a'}, Command{Op: OpUndelete, Path: "/a", Flags: FlagParents}},
	{[]byte{1, 24, 0x01, 0, 0x00}, Command{Op: OpSafeMode, Flags: FlagSafeModeEnter}},
	{[]byte{1, 24, 0x00, 0, 0x00}, Command{Op: OpSafeMode}},
}

// TestFlagsHaveDistinctBits: no two flags share a bit, and flagAll holds
// them all.
func TestFlagsHaveDistinctBits(t *testing.T) {
	var seen uint16
	for _, f := range allFlags {
		if bits.OnesCount16(f) != 1 || seen&f != 0 {
			t.Errorf("flag %#x is not a bit of its own", f)
		}
		seen |= f
	}
	if seen != flagAll {
		t.Errorf("the flags make %#x, flagAll is %#x", seen, flagAll)
	}
}

// TestV1CommandsDecodeByOp: commands already in logs decode as they did
// when their flags shared bits, and encode again in encoding 2 to the
// same command.
func TestV1CommandsDecodeByOp(t *testing.T) {
	for _, tc := range v1Commands {
		got, err := DecodeCommand(tc.bytes)
		if err != nil || !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("%x decodes as %+v (%v), want %+v", tc.bytes, got, err, tc.want)
			continue
		}
		b := got.Encode(nil)
		if b[0] != encodingVersion {
			t.Errorf("%v re-encodes as version %d", got.Op, b[0])
		}
		again, err := DecodeCommand(b)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%v re-encoded as %x decodes as %+v (%v)", got.Op, b, again, err)
		}
	}
}

// TestV1ExchangeStillSwaps applies a logged v1 rename whose flag byte has
// FlagRecursive's bit: it swaps the two files, as it did when that bit
// meant FlagExchange for a rename.
func TestV1ExchangeStillSwaps(t *testing.T) {
	s := newTNS(t)
	a := s.ok(&Command{Op: OpCreate, Path: "/a", Mode: 0o644}).Info.Inode
	b := s.ok(&Command{Op: OpCreate, Path: "/b", Mode: 0o644}).Info.Inode
	c, err := DecodeCommand([]byte{1, 4, 0x10, 0, 0x0c, 2, '/', 'a', 2, '/', 'b'})
	if err != nil {
		t.Fatal(err)
	}
	s.ok(c)
	if got := s.stat(chunkfs.Root, "/a").Inode; got != b {
		t.Errorf("/a is inode %d after the exchange, want %d", got, b)
	}
	if got := s.stat(chunkfs.Root, "/b").Inode; got != a {
		t.Errorf("/b is inode %d after the exchange, want %d", got, a)
	}
}

// TestV2Flags: every flag travels on its own bit in encoding 2, the high
// ones in a second varint byte; a bit no flag has is refused.
func TestV2Flags(t *testing.T) {
	for _, f := range allFlags {
		for _, op := range []Op{OpMkdir, OpRename, OpSetAttr, OpSafeMode} {
			c := Command{Op: op, Path: "/a", Flags: f}
			got, err := DecodeCommand(c.Encode(nil))
			if err != nil || got.Flags != f {
				t.Errorf("%v with flag %#x decodes with %#x (%v)", op, f, got.Flags, err)
			}
		}
	}
	enter := (&Command{Op: OpSafeMode, Flags: FlagSafeModeEnter}).Encode(nil)
	if want := []byte{2, 24, 0x80, 0x20, 0, 0}; !bytes.Equal(enter, want) {
		t.Errorf("safe mode enter encodes as %x, want %x", enter, want)
	}
	for _, b := range [][]byte{
		{2, 2, 0x80, 0x40, 0, 0}, // 1<<13: no flag's
		{2, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0},
		{3, 2, 0, 0, 0},        // no such encoding
		{2, 2, 0x80},           // flags cut short
		{2, 24, 0x80, 0x20, 0}, // presence missing
	} {
		if c, err := DecodeCommand(b); err == nil || !strings.HasPrefix(err.Error(), "namespace: malformed command") {
			t.Errorf("%x decodes as %+v (%v); want a malformed-command error", b, c, err)
		}
	}
}

// TestDecodeErrorsNameTheirCause: the shared reader's errors name the
// cause and what was being read.
func TestDecodeErrorsNameTheirCause(t *testing.T) {
	for b, want := range map[string]string{
		string([]byte{2, 2, 0, 0, 0x04, 5, '/'}):            "truncated command",
		string([]byte{2, 2, 0, 0, 0x04, 0x80}):              "bad varint",
		string([]byte{2, 2, 0, 0, 0x04, 0x02, '/', 'a', 0}): "trailing bytes",
		string([]byte{2, 2, 0, 0, 0x80, 0x80, 0x02}):        "above limit",
	} {
		_, err := DecodeCommand([]byte(b))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%x: error %v, want one naming %q", b, err, want)
		}
	}
	_, err := Restore(bytes.NewReader(nil))
	if err == nil || !strings.Contains(err.Error(), "truncated snapshot") {
		t.Errorf("an empty checkpoint: %v", err)
	}
}

// TestFlagsDoNotAlias: a flag of one op means nothing to another. With
// shared bits, FlagTouch made a mkdir make parents and FlagExchange made
// a delete recursive.
func TestFlagsDoNotAlias(t *testing.T) {
	s := newTNS(t)
	s.fails(&Command{Op: OpMkdir, Path: "/x/y", Mode: 0o755, Flags: FlagTouch | FlagTimesNow | FlagSafeModeEnter}, chunkfs.KindNotExist)
	s.ok(&Command{Op: OpMkdir, Path: "/d/e", Mode: 0o755, Flags: FlagParents})
	s.fails(&Command{Op: OpDelete, Path: "/d", Flags: FlagExchange}, chunkfs.KindNotEmpty)
	s.ok(&Command{Op: OpCreate, Path: "/f", Mode: 0o644})
	if r := s.ok(&Command{Op: OpAllocChunk, Path: "/f", Index: 0, Flags: FlagFirstChunk}); !r.Allocated {
		t.Error("chunk 0 not allocated")
	}
	if r := s.ok(&Command{Op: OpAllocChunk, Path: "/f", Index: 2, Flags: FlagFirstChunk}); !r.Allocated {
		t.Error("an allocation without FlagAppend was held to the last or next chunk")
	}
}
