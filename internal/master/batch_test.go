package master

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/clock"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/rpc"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/rpc/wiretest"
	"google.golang.org/protobuf/proto"
)

func statOp(c *pb.Caller, p string) *pb.MetaOp {
	return &pb.MetaOp{Op: &pb.MetaOp_Stat{Stat: &pb.StatRequest{Caller: c, Path: p}}}
}

func createOp(c *pb.Caller, p string, exclusive bool) *pb.MetaOp {
	return &pb.MetaOp{Op: &pb.MetaOp_Create{Create: &pb.CreateRequest{Caller: c, Path: p, Mode: 0o644, Exclusive: exclusive}}}
}

func mkdirOp(c *pb.Caller, p string, mode uint32) *pb.MetaOp {
	return &pb.MetaOp{Op: &pb.MetaOp_Mkdir{Mkdir: &pb.MkdirRequest{Caller: c, Path: p, Mode: mode}}}
}

// resultKind is the Kind of a result's error, or ok (-1) for a success.
func resultKind(r *pb.MetaResult) int {
	if d := r.GetError(); d != nil {
		return int(d.Kind)
	}
	return -1
}

const ok = -1

func (tm *testMaster) batch(ops ...*pb.MetaOp) *pb.BatchResponse {
	tm.t.Helper()
	resp, err := tm.c.Batch(bg, &pb.BatchRequest{Ops: ops})
	if err != nil {
		tm.t.Fatal(err)
	}
	if len(resp.Results) != len(ops) {
		tm.t.Fatalf("%d results for %d ops", len(resp.Results), len(ops))
	}
	return resp
}

func (tm *testMaster) exists(p string) bool {
	_, err := tm.c.Stat(bg, &pb.StatRequest{Caller: root, Path: p})
	return err == nil
}

// TestBatchMixedOps: good and bad ops in one batch; each bad op fails alone
// with the error its unary form gives, and changes nothing.
func TestBatchMixedOps(t *testing.T) {
	tm := startMaster(t, "", nil)
	tm.create(alice, "/old")
	ops := []*pb.MetaOp{
		createOp(alice, "/new", true),        // ok
		createOp(alice, "/old", true),        // exists
		createOp(alice, "relative", false),   // invalid path
		createOp(alice, "/missing/f", false), // parent missing
		mkdirOp(alice, "/dir", 0o755),        // ok
		statOp(alice, "/old"),                // ok
		statOp(alice, "/nothing"),            // not found
		statOp(alice, "/a/../b"),             // invalid path
		{},                                   // no op at all
		{Op: &pb.MetaOp_Stat{}},              // op without its request
		{Op: &pb.MetaOp_Rename{Rename: &pb.RenameRequest{Caller: alice, Src: "/old", Dst: "/renamed"}}}, // ok
		{Op: &pb.MetaOp_Delete{Delete: &pb.DeleteRequest{Caller: alice, Path: "/nothing"}}},             // not found
		{Op: &pb.MetaOp_SetAttr{SetAttr: &pb.SetAttrRequest{Caller: alice, Path: "/dir", Mode: proto.Uint32(0o700)}}},
		{Op: &pb.MetaOp_CommitLength{CommitLength: &pb.CommitLengthRequest{Caller: alice, Path: "/new", Length: 10}}},
		{Op: &pb.MetaOp_Create{Create: &pb.CreateRequest{Caller: &pb.Caller{Uid: 1, Gids: make([]uint32, 100)}, Path: "/g"}}}, // too many groups
	}
	want := []int{ok, int(chunkfs.KindExist), int(chunkfs.KindInvalid), int(chunkfs.KindNotExist), ok, ok,
		int(chunkfs.KindNotExist), int(chunkfs.KindInvalid), int(chunkfs.KindInvalid), int(chunkfs.KindInvalid),
		ok, int(chunkfs.KindNotExist), ok, ok, int(chunkfs.KindInvalid)}
	resp := tm.batch(ops...)
	for i, r := range resp.Results {
		if got := resultKind(r); got != want[i] {
			t.Errorf("op %d: result %v, want kind %d", i, r, want[i])
		}
	}
	if d := resp.Results[6].GetError(); d.GetPath() != "/nothing" || d.GetOp() != "stat" {
		t.Errorf("stat error names op %q path %q", d.GetOp(), d.GetPath())
	}
	if !resp.Results[0].GetCreate().GetCreated() || resp.Results[5].GetStat().GetInfo().GetName() != "old" {
		t.Errorf("answers: %v / %v", resp.Results[0], resp.Results[5])
	}
	if got := resp.Results[13].GetCommitLength().GetLength(); got != 10 {
		t.Errorf("commit length answered %d", got)
	}
	for p, want := range map[string]bool{"/new": true, "/dir": true, "/renamed": true, "/old": false, "/g": false, "/missing": false} {
		if tm.exists(p) != want {
			t.Errorf("%s exists: %v, want %v", p, !want, want)
		}
	}
	st, _ := tm.c.Stat(bg, &pb.StatRequest{Caller: root, Path: "/dir"})
	if st.Info.Mode&0o777 != 0o700 {
		t.Errorf("setattr in a batch: mode %o", st.Info.Mode)
	}
}

// TestBatchPermissionsPerOp: each op acts as its own caller.
func TestBatchPermissionsPerOp(t *testing.T) {
	tm := startMaster(t, "", nil)
	tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: alice, Path: "/alice", Mode: 0o755})
	tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: alice, Path: "/private", Mode: 0o700})
	tm.create(alice, "/private/secret")
	resp := tm.batch(
		createOp(alice, "/alice/mine", false),
		createOp(bob, "/alice/bobs", false),
		statOp(alice, "/private/secret"),
		statOp(bob, "/private/secret"),
		statOp(nil, "/private/secret"), // no caller: nobody
		&pb.MetaOp{Op: &pb.MetaOp_Delete{Delete: &pb.DeleteRequest{Caller: bob, Path: "/private/secret"}}},
		&pb.MetaOp{Op: &pb.MetaOp_SetAttr{SetAttr: &pb.SetAttrRequest{Caller: bob, Path: "/alice", Uid: proto.Uint32(1001)}}},
		&pb.MetaOp{Op: &pb.MetaOp_SetAttr{SetAttr: &pb.SetAttrRequest{Caller: root, Path: "/alice/mine", Uid: proto.Uint32(1001)}}},
	)
	perm := int(chunkfs.KindPermission)
	want := []int{ok, perm, ok, perm, perm, perm, perm, ok}
	for i, r := range resp.Results {
		if got := resultKind(r); got != want[i] {
			t.Errorf("op %d: result %v, want kind %d", i, r, want[i])
		}
	}
	if tm.exists("/alice/bobs") || !tm.exists("/private/secret") || !tm.exists("/alice/mine") {
		t.Error("a refused op changed the namespace, or an allowed one did not")
	}
	st, _ := tm.c.Stat(bg, &pb.StatRequest{Caller: root, Path: "/alice"})
	if st.Info.Uid != 1000 {
		t.Errorf("bob's chown of /alice applied: uid %d", st.Info.Uid)
	}
}

// TestBatchLimits: over the op count or bytes the whole call fails with
// InvalidArgument and nothing is done.
func TestBatchLimits(t *testing.T) {
	tm := startMaster(t, "", nil)
	before := tm.m.StateID()
	many := make([]*pb.MetaOp, rpc.MaxBatchOps+1)
	for i := range many {
		many[i] = createOp(root, fmt.Sprintf("/f%d", i), false)
	}
	long := "/" + strings.Repeat("x", 255)
	var big []*pb.MetaOp
	for range rpc.MaxBatchBytes/(len(long)+rpc.BatchOpOverhead) + 1 {
		big = append(big, createOp(root, long, false))
	}
	for _, ops := range [][]*pb.MetaOp{many, big} {
		_, err := tm.c.Batch(bg, &pb.BatchRequest{Ops: ops})
		if k := kindOf(err); k != chunkfs.KindTooLarge || !strings.Contains(err.Error(), "at most") {
			t.Errorf("batch of %d ops: %v (kind %v), want a too-large error", len(ops), err, k)
		}
	}
	if tm.exists("/f0") || tm.exists(long) || tm.m.StateID() != before {
		t.Error("a refused batch changed the namespace")
	}
	// Exactly at the count limit is fine; an empty batch answers nothing.
	resp := tm.batch(many[:rpc.MaxBatchOps]...)
	for i, r := range resp.Results {
		if resultKind(r) != ok {
			t.Fatalf("op %d: %v", i, r)
		}
	}
	if resp := tm.batch(); len(resp.Results) != 0 {
		t.Errorf("empty batch: %v", resp)
	}
}

// TestBatchStateIDs: a batch's mutations are one log entry and carry its
// index; stats carry the state they saw; the response carries the highest.
func TestBatchStateIDs(t *testing.T) {
	tm := startMaster(t, "", nil)
	tm.create(root, "/seen")
	before := tm.m.StateID()
	var ops []*pb.MetaOp
	for i := range 50 {
		ops = append(ops, createOp(root, fmt.Sprintf("/f%d", i), false))
	}
	ops = append(ops, statOp(root, "/seen"), createOp(root, "/seen", true))
	resp := tm.batch(ops...)
	after := tm.m.StateID()
	if after != before+1 {
		t.Errorf("state ID %d → %d: 50 creates were not one log entry", before, after)
	}
	for i := range 50 {
		if id := resp.Results[i].GetCreate().GetStateId(); id != uint64(after) {
			t.Errorf("create %d: state ID %d, want %d", i, id, after)
		}
	}
	if id := resp.Results[50].GetStat().GetStateId(); id < uint64(before) || id > uint64(after) {
		t.Errorf("stat state ID %d not in [%d, %d]", id, before, after)
	}
	if resultKind(resp.Results[51]) != int(chunkfs.KindExist) {
		t.Errorf("exclusive create of an existing file: %v", resp.Results[51])
	}
	if resp.StateId != uint64(after) {
		t.Errorf("response state ID %d, want %d", resp.StateId, after)
	}
	// A stat asking for a state the master has not seen fails alone.
	far := &pb.MetaOp{Op: &pb.MetaOp_Stat{Stat: &pb.StatRequest{Caller: root, Path: "/seen", MinStateId: uint64(after) + 100}}}
	resp = tm.batch(far, statOp(root, "/seen"))
	if resultKind(resp.Results[0]) != int(chunkfs.KindUnavailable) || resultKind(resp.Results[1]) != ok {
		t.Errorf("future state ID: %v", resp.Results)
	}
}

// TestBatchTruncateCuts: a truncation in a batch cuts its chunk on the
// replicas before it is answered, as the unary SetAttr does.
func TestBatchTruncateCuts(t *testing.T) {
	tm := startMaster(t, "", nil)
	cs := []*fakeCS{tm.startCS("a", ""), tm.startCS("b", ""), tm.startCS("c", "")}
	tm.create(alice, "/f")
	tm.prepare(alice, "/f", 0, false)
	h1 := tm.prepare(alice, "/f", 1, false).Chunk.Handle
	tm.c.CommitLength(bg, &pb.CommitLengthRequest{Caller: alice, Path: "/f", Length: 2 << 20})
	resp := tm.batch(
		&pb.MetaOp{Op: &pb.MetaOp_SetAttr{SetAttr: &pb.SetAttrRequest{Caller: alice, Path: "/f", Length: proto.Int64(1<<20 + 100)}}},
		createOp(alice, "/g", false),
	)
	if resultKind(resp.Results[0]) != ok || resultKind(resp.Results[1]) != ok || resp.Results[0].GetSetAttr().GetInfo().GetLength() != 1<<20+100 {
		t.Fatalf("results: %v", resp.Results)
	}
	for _, f := range cs {
		if tr := f.truncateCalls(); len(tr) != 1 || tr[0].Handle != h1 || tr[0].Length != 100 {
			t.Errorf("%s truncates: %v", f.id, tr)
		}
	}
}

// TestBatchConcurrent: batches of creates, renames, deletes and stats from
// many goroutines, beside unary calls, in the same directories (run under
// -race); the namespace checker runs at cleanup.
func TestBatchConcurrent(t *testing.T) {
	tm := startMaster(t, "", nil)
	for d := range 4 {
		tm.c.Mkdir(bg, &pb.MkdirRequest{Caller: root, Path: fmt.Sprintf("/d%d", d), Mode: 0o777})
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				var ops []*pb.MetaOp
				for j := range 8 {
					p := fmt.Sprintf("/d%d/f%d", (g+j)%4, (i+j)%10)
					q := fmt.Sprintf("/d%d/f%d", (g+j+1)%4, (i+j+3)%10)
					switch (g + i + j) % 4 {
					case 0:
						ops = append(ops, createOp(alice, p, j%2 == 0))
					case 1:
						ops = append(ops, &pb.MetaOp{Op: &pb.MetaOp_Rename{Rename: &pb.RenameRequest{Caller: alice, Src: p, Dst: q}}})
					case 2:
						ops = append(ops, &pb.MetaOp{Op: &pb.MetaOp_Delete{Delete: &pb.DeleteRequest{Caller: alice, Path: p}}})
					default:
						ops = append(ops, statOp(alice, p))
					}
				}
				if g%3 == 0 {
					tm.c.Create(bg, &pb.CreateRequest{Caller: alice, Path: fmt.Sprintf("/d%d/u%d", g%4, i), Mode: 0o644})
				}
				resp, err := tm.c.Batch(bg, &pb.BatchRequest{Ops: ops})
				if err != nil || len(resp.Results) != len(ops) {
					t.Errorf("batch: %v", err)
					return
				}
				for k, r := range resp.Results {
					if resultKind(r) == int(chunkfs.KindInvalid) || resultKind(r) == int(chunkfs.KindOther) {
						t.Errorf("op %d: %v", k, r)
					}
				}
			}
		}()
	}
	wg.Wait()
}

// FuzzBatch decodes arbitrary bytes as a BatchRequest, as the gRPC server
// would, and hands it straight to the handler (so a panic surfaces here):
// each op gets exactly one result and the namespace stays consistent.
func FuzzBatch(f *testing.F) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	cfg := testConfig(f, f.TempDir(), clk)
	cfg.NoSync = true // fuzzing explores logic, not durability
	tm := startWith(f, cfg, clk)
	for _, ops := range [][]*pb.MetaOp{
		{createOp(alice, "/a", false), statOp(bob, "/a"), mkdirOp(root, "/d", 0o1777)},
		{{Op: &pb.MetaOp_Rename{Rename: &pb.RenameRequest{Caller: alice, Src: "/a", Dst: "/d/b"}}}, {}},
		{{Op: &pb.MetaOp_SetAttr{SetAttr: &pb.SetAttrRequest{Caller: root, Path: "/a", Length: proto.Int64(5)}}}},
	} {
		b, err := proto.Marshal(&pb.BatchRequest{Ops: ops})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req pb.BatchRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		resp, err := tm.m.Server().Batch(bg, &req)
		if err == nil && len(resp.Results) != len(req.Ops) {
			t.Fatalf("%d results for %d ops", len(resp.Results), len(req.Ops))
		}
		if err == nil {
			for i, r := range resp.Results {
				if r == nil || r.Result == nil {
					t.Fatalf("op %d unanswered", i)
				}
			}
		}
		if err := tm.m.Check(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestBatchAnswersCarryEveryField: each kind of batch result, with every
// field set, leaves no field of its answer on the wire empty, and the
// response carries the highest state ID.
func TestBatchAnswersCarryEveryField(t *testing.T) {
	fi := *rpc.FileInfoOf(wiretest.Fill(&pb.FileInfo{}))
	notLeader := &chunkfs.Error{Op: "stat", Path: "/p", Kind: chunkfs.KindNotLeader, Err: &chunkfs.LeaderHint{Leader: "a:1"}}
	results := []batchResult{{stat: true, stateID: 1, info: fi}, {err: notLeader}}
	for i, op := range []namespace.Op{namespace.OpCreate, namespace.OpMkdir, namespace.OpTrash, namespace.OpRename, namespace.OpSetAttr, namespace.OpCommitLength} {
		results = append(results, batchResult{op: op, stateID: uint64(2 + i), info: fi, created: true, parent: &fi})
	}
	resp := batchTo(results)
	if len(resp.Results) != len(results) || resp.StateId != 7 {
		t.Fatalf("%d results at state %d, want %d at 7", len(resp.Results), resp.StateId, len(results))
	}
	for i, r := range resp.Results {
		if unset := wiretest.Unset(r.ProtoReflect()); len(unset) > 0 {
			t.Errorf("result %d (%T): fields not filled: %v", i, r.GetResult(), unset)
		}
	}
	if e := rpc.ErrorOf(resp.Results[1].GetError()); e.Kind != chunkfs.KindNotLeader || e.Path != "/p" {
		t.Errorf("error result read back as %v", e)
	}
}
