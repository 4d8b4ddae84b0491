package namespace

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
)

// TestSafeModeHoldIsLoggedAndCheckpointed: enter holds, leave releases and
// records the latest forced leave (a leave logged with an older time does
// not move it back), both survive encoding, and a snapshot keeps them; a
// format 4 snapshot restores with no hold.
func TestSafeModeHoldIsLoggedAndCheckpointed(t *testing.T) {
	ns := New()
	steps := []struct {
		c        Command
		held     bool
		leftAt   int64
		describe string
	}{
		{Command{Op: OpSafeMode, Flags: FlagSafeModeEnter, Time: 10}, true, 0, "enter"},
		{Command{Op: OpSafeMode, Flags: FlagSafeModeEnter, Time: 20}, true, 0, "enter again"},
		{Command{Op: OpSafeMode, Time: 30}, false, 30, "leave"},
		{Command{Op: OpSafeMode, Time: 25}, false, 30, "leave stamped earlier"},
		{Command{Op: OpSafeMode, Flags: FlagSafeModeEnter, Time: 40}, true, 30, "enter after a leave"},
	}
	for _, s := range steps {
		if r := ns.ApplyEncoded(s.c.Encode(nil)); r.Err != nil {
			t.Fatalf("%s: %v", s.describe, r.Err)
		}
		if held, left := ns.SafeModeHeld(); held != s.held || left != s.leftAt {
			t.Fatalf("%s: held %v left %d, want %v %d", s.describe, held, left, s.held, s.leftAt)
		}
	}
	var buf bytes.Buffer
	if err := ns.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Restore(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if held, left := back.SafeModeHeld(); !held || left != 30 {
		t.Fatalf("restored: held %v left %d, want true 30", held, left)
	}
	for _, v := range []byte{snapshotLinks, snapshotTrash} {
		buf.Reset()
		if err := ns.snapshotAs(&buf, v); err != nil {
			t.Fatal(err)
		}
		old, err := Restore(&buf)
		if err != nil {
			t.Fatalf("format %d: %v", v, err)
		}
		if held, left := old.SafeModeHeld(); held || left != 0 {
			t.Fatalf("format %d: held %v left %d, want none", v, held, left)
		}
	}
}

// TestFrozenCheckpointKeepsSafeModeOfItsFreeze: a checkpoint written after
// an enter that followed its freeze has the hold as it was at the freeze.
func TestFrozenCheckpointKeepsSafeModeOfItsFreeze(t *testing.T) {
	ns := New()
	f := ns.Freeze()
	if r := ns.ApplyEncoded((&Command{Op: OpSafeMode, Flags: FlagSafeModeEnter, Time: 10}).Encode(nil)); r.Err != nil {
		t.Fatal(r.Err)
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Restore(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if held, _ := back.SafeModeHeld(); held {
		t.Fatal("the checkpoint frozen before the enter holds safe mode")
	}
	if held, _ := ns.SafeModeHeld(); !held {
		t.Fatal("the live namespace lost the hold")
	}
}

// TestRestoreRefusesBadSafeMode: a held flag other than 0 or 1 is refused.
func TestRestoreRefusesBadSafeMode(t *testing.T) {
	ns := New()
	var buf bytes.Buffer
	if err := ns.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// The state ends: ..., the trash, held 0, left 0, cluster ID "", no
	// held-back replica, CRC (4 bytes).
	b[len(b)-8] = 2
	body := b[:len(b)-4]
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(body, crcTable))
	_, err := Restore(bytes.NewReader(b))
	if err == nil || !strings.Contains(err.Error(), "above limit") {
		t.Fatalf("a held flag of 2: %v, want refused as above its limit", err)
	}
}
