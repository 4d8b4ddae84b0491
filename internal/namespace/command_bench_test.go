package namespace

import (
	"testing"

	"github.com/chunkfs/chunkfs"
)

// BenchmarkDecodeCommand decodes a create as the log holds it: the work
// every apply of a replayed or replicated entry starts with.
func BenchmarkDecodeCommand(b *testing.B) {
	c := &Command{Op: OpCreate, Time: 1_700_000_000_000_000_000, Caller: chunkfs.Caller{UID: 1000, GIDs: []uint32{100, 27}},
		Path: "/data/logs/2026/12/05/events-000123.log", Mode: 0o644, Replication: 3, Flags: FlagExclusive}
	enc := c.Encode(nil)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeCommand(enc); err != nil {
			b.Fatal(err)
		}
	}
}
