package client

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/rpc/wiretest"
)

// TestPBOnlyAtTheEdge: only the edge files, named *_rpc.go, import the
// generated wire types, and they hold only the edge's work
// (wiretest.OffTheWire); the rest of the client reasons in its own.
func TestPBOnlyAtTheEdge(t *testing.T) {
	edge := func(f string) bool { return strings.HasSuffix(f, "_rpc.go") }
	bad, read, err := wiretest.OutsideEdge(".", edge)
	if err != nil || read < 10 {
		t.Fatalf("read %d files: %v", read, err)
	}
	for _, f := range bad {
		t.Errorf("%s imports pb: make the call in an _rpc.go file, in the client's types", f)
	}
	off, err := wiretest.OffTheWire(".", edge)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range off {
		t.Errorf("%s does not touch the wire: logic belongs in a domain file", f)
	}
}

// wireMaster answers the calls the tests below make with messages whose
// every field is set, and keeps the requests.
type wireMaster struct {
	masterAPI // calls not listed here panic
	reqs      []proto.Message
}

func (m *wireMaster) Create(_ context.Context, r *pb.CreateRequest) (*pb.CreateResponse, error) {
	m.reqs = append(m.reqs, r)
	return wiretest.Fill(&pb.CreateResponse{}), nil
}

func (m *wireMaster) SetAttr(_ context.Context, r *pb.SetAttrRequest) (*pb.SetAttrResponse, error) {
	m.reqs = append(m.reqs, r)
	return wiretest.Fill(&pb.SetAttrResponse{}), nil
}

func (m *wireMaster) Rename(_ context.Context, r *pb.RenameRequest) (*pb.RenameResponse, error) {
	m.reqs = append(m.reqs, r)
	return wiretest.Fill(&pb.RenameResponse{}), nil
}

func (m *wireMaster) Fsck(_ context.Context, r *pb.FsckRequest) (*pb.FsckResponse, error) {
	return wiretest.Fill(&pb.FsckResponse{}), nil
}

func (m *wireMaster) GetChunks(_ context.Context, r *pb.GetChunksRequest) (*pb.GetChunksResponse, error) {
	return wiretest.Fill(&pb.GetChunksResponse{}), nil
}

func newWireClient() (*Client, *wireMaster) {
	m := &wireMaster{}
	c := &Client{masterConn: masterConn{master: m, caller: &pb.Caller{Uid: 1, Gids: []uint32{1}}}}
	return c, m
}

// TestWireRequestsCarryEveryField: the edge's requests, built from the
// client's values with every field set, leave no field of the message
// empty, so a field added to a request and forgotten in the edge fails.
func TestWireRequestsCarryEveryField(t *testing.T) {
	c, m := newWireClient()
	ctx := context.Background()
	u32, i64 := uint32(1), int64(1)
	if _, _, err := c.createCall(ctx, createSpec{path: "/a", mode: 1, replication: 1, exclusive: true, truncate: true,
		firstChunk: true, rdev: 1, symlinkTarget: "t", time: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.setAttrCall(ctx, "/a", attrChange{mode: &u32, uid: &u32, gid: &u32, atime: &i64, mtime: &i64,
		timesNow: true, replication: &u32, length: &i64}); err != nil {
		t.Fatal(err)
	}
	if err := c.renameCall(ctx, "/a", "/b", renameFlags{noReplace: true, exchange: true}); err != nil {
		t.Fatal(err)
	}
	for _, r := range m.reqs {
		if unset := wiretest.Unset(r.ProtoReflect()); len(unset) > 0 {
			t.Errorf("%s: fields not filled: %v", r.ProtoReflect().Descriptor().Name(), unset)
		}
	}
}

// TestWireAnswersReadEveryField: the edge's conversions of answers whose
// every field is set leave no field of the client's value empty (the
// cluster report's: TestReportReadsEveryField).
func TestWireAnswersReadEveryField(t *testing.T) {
	c, _ := newWireClient()
	ctx := context.Background()
	check := func(name string, v any) {
		t.Helper()
		if zero := wiretest.Zero(v); len(zero) > 0 {
			t.Errorf("%s: fields not read: %v", name, zero)
		}
	}
	check("trash entry", trashEntry(wiretest.Fill(&pb.TrashEntry{})))
	fsck, err := c.fsckCall(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	check("fsck", fsck)
	fi, _, err := c.createCall(ctx, createSpec{path: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	check("file info", fi)
	page, err := c.getChunksCall(ctx, "/a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	loc := page.chunks[0]
	check("chunk info", ChunkInfo{Index: loc.index, Handle: uint64(loc.handle), Version: uint64(loc.version),
		Replicas: loc.replicas, Primary: loc.primary})
	if page.chunkSize == 0 || page.file.Length == 0 || loc.leaseLeft == 0 || len(loc.token) == 0 {
		t.Errorf("chunk page not read: %+v, %+v", page, loc)
	}
	if c.minState() == 0 {
		t.Error("the answers' state IDs were not observed")
	}
}
