package master

import (
	"testing"
	"time"

	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

// FuzzHandlers sends arbitrary paths, modes and sizes straight to the
// handlers (no gRPC, so a panic would surface here) and checks the
// namespace after each call.
func FuzzHandlers(f *testing.F) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(f, f.TempDir(), clk)
	cfg.NoSync = true // fuzzing explores logic, not durability
	tm := startWith(f, cfg, clk)
	f.Add(uint8(0), "/a", "/b", uint32(0o755), int64(0), uint32(0))
	f.Add(uint8(1), "/a/b", "", uint32(0o644), int64(5), uint32(3))
	f.Add(uint8(2), "/a", "/a/b", uint32(0), int64(-1), uint32(17))
	f.Add(uint8(5), "/a/../b", "x\x00", uint32(1<<31), int64(1<<62), uint32(1000))
	f.Add(uint8(12), "", "start", uint32(0), int64(5), uint32(0))
	f.Add(uint8(13), "cs1", "", uint32(0), int64(1), uint32(0))
	f.Add(uint8(14), "", "enter", uint32(0), int64(0), uint32(0))
	f.Add(uint8(14), "", "leave", uint32(0), int64(0), uint32(1))
	f.Fuzz(func(t *testing.T, op uint8, p, q string, mode uint32, n int64, uid uint32) {
		c := &pb.Caller{Uid: uid % 3 * 1000, Gids: []uint32{uid % 5}}
		switch op % 15 {
		case 0:
			tm.m.Server().Mkdir(bg, &pb.MkdirRequest{Caller: c, Path: p, Mode: mode, Parents: n%2 == 0})
		case 1:
			tm.m.Server().Create(bg, &pb.CreateRequest{Caller: c, Path: p, Mode: mode, Replication: uint32(n), SymlinkTarget: q, Truncate: n%3 == 0})
		case 2:
			tm.m.Server().Rename(bg, &pb.RenameRequest{Caller: c, Src: p, Dst: q, NoReplace: n%2 == 0})
		case 3:
			tm.m.Server().Delete(bg, &pb.DeleteRequest{Caller: c, Path: p, Recursive: n%2 == 0})
		case 4:
			tm.m.Server().SetAttr(bg, &pb.SetAttrRequest{Caller: c, Path: p, Mode: &mode, Length: &n})
		case 5:
			tm.m.Server().List(bg, &pb.ListRequest{Caller: c, Path: p, After: q, Limit: mode})
		case 6:
			tm.m.Server().GetChunks(bg, &pb.GetChunksRequest{Caller: c, Path: p, FirstIndex: n, Count: mode})
		case 7:
			tm.m.Server().CommitLength(bg, &pb.CommitLengthRequest{Caller: c, Path: p, Length: n})
		case 8:
			tm.m.Server().PrepareWrite(bg, &pb.PrepareWriteRequest{Caller: c, Path: p, Index: n, Append: mode%2 == 0})
		case 9:
			tm.m.Server().SetXattr(bg, &pb.SetXattrRequest{Caller: c, Path: p, Name: q, Value: []byte(q), Create: n%2 == 0, Replace: n%3 == 0})
		case 10:
			tm.m.Server().GetXattr(bg, &pb.GetXattrRequest{Caller: c, Path: p, Name: q})
			tm.m.Server().ListXattr(bg, &pb.ListXattrRequest{Caller: c, Path: p})
		case 11:
			tm.m.Server().RemoveXattr(bg, &pb.RemoveXattrRequest{Caller: c, Path: p, Name: q})
		case 12:
			tm.m.Server().Balance(bg, &pb.BalanceRequest{Caller: c, Action: q, Threshold: float64(n)})
		case 13:
			tm.m.Server().Decommission(bg, &pb.DecommissionRequest{Caller: c, Server: p, Recommission: n%2 == 0})
		case 14:
			tm.m.Server().SafeMode(bg, &pb.SafeModeRequest{Caller: c, Action: q})
		}
		if err := tm.m.Check(); err != nil {
			t.Fatal(err)
		}
	})
}
