package chunkserver

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/chunkstore"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/rpc/wiretest"
	ctoken "github.com/chunkfs/chunkfs/internal/token"
)

// TestPBOnlyAtTheEdge checks that the generated wire types appear only in
// the RPC edge: wire.go (the conversions and outgoing calls) and
// service.go (the gRPC handlers), and that these hold only the edge's
// work (wiretest.OffTheWire). The rest of the package reasons in its own
// types.
func TestPBOnlyAtTheEdge(t *testing.T) {
	files := map[string]bool{"wire.go": true, "service.go": true}
	edge := func(f string) bool { return files[f] }
	bad, read, err := wiretest.OutsideEdge(".", edge)
	if err != nil || read < 10 {
		t.Fatalf("read %d files: %v", read, err)
	}
	for _, f := range bad {
		t.Errorf("%s imports pb: convert at the edge (wire.go) instead", f)
	}
	off, err := wiretest.OffTheWire(".", edge)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range off {
		t.Errorf("%s does not touch the wire: logic belongs in a domain file", f)
	}
}

// allSet fails unless every field of m is set: a field added to the
// message that the conversion does not fill shows up here.
func allSet(t *testing.T, m proto.Message) {
	t.Helper()
	if unset := wiretest.Unset(m.ProtoReflect()); len(unset) > 0 {
		t.Errorf("%s: fields not filled: %v", m.ProtoReflect().Descriptor().Name(), unset)
	}
}

// wirePeer and wireMaster keep the requests the server's calls send and
// answer each with an empty message.
type wirePeer struct {
	pb.ChunkServerClient // calls not listed here panic
	reqs                 []proto.Message
}

func (p *wirePeer) Apply(_ context.Context, r *pb.ApplyRequest, _ ...grpc.CallOption) (*pb.ApplyResponse, error) {
	p.reqs = append(p.reqs, r)
	return &pb.ApplyResponse{}, nil
}

func (p *wirePeer) Sync(_ context.Context, r *pb.SyncRequest, _ ...grpc.CallOption) (*pb.SyncResponse, error) {
	p.reqs = append(p.reqs, r)
	return &pb.SyncResponse{}, nil
}

func (p *wirePeer) ChunkInfo(_ context.Context, r *pb.ChunkInfoRequest, _ ...grpc.CallOption) (*pb.ChunkInfoResponse, error) {
	p.reqs = append(p.reqs, r)
	return &pb.ChunkInfoResponse{}, nil
}

type wireMaster struct {
	pb.MasterClient // calls not listed here panic
	reqs            []proto.Message
}

func (m *wireMaster) Register(_ context.Context, r *pb.RegisterRequest, _ ...grpc.CallOption) (*pb.RegisterResponse, error) {
	m.reqs = append(m.reqs, r)
	return &pb.RegisterResponse{}, nil
}

func (m *wireMaster) Heartbeat(_ context.Context, r *pb.HeartbeatRequest, _ ...grpc.CallOption) (*pb.HeartbeatResponse, error) {
	m.reqs = append(m.reqs, r)
	return &pb.HeartbeatResponse{}, nil
}

func (m *wireMaster) ReportCorrupt(_ context.Context, r *pb.ReportCorruptRequest, _ ...grpc.CallOption) (*pb.ReportCorruptResponse, error) {
	m.reqs = append(m.reqs, r)
	return &pb.ReportCorruptResponse{}, nil
}

// TestWireMutationRoundTrip: the Apply a primary sends decodes, at the
// secondary, to the mutation it ordered.
func TestWireMutationRoundTrip(t *testing.T) {
	m := mutation{Handle: 7, Version: 3, Serial: 9, Offset: 1 << 20, Length: 4096, Data: 11, Pad: true}
	peer := &wirePeer{}
	if err := (peerLink{peer}).apply(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	p := peer.reqs[0].(*pb.ApplyRequest)
	allSet(t, p)
	if got := mutationFrom(p); got != m {
		t.Fatalf("round trip: %+v, want %+v", got, m)
	}
}

func TestWireReplicaStateRoundTrip(t *testing.T) {
	r := replicaState{Version: 4, Length: 123, Primary: true, LeaseLeft: 1500 * time.Millisecond, NoSpace: true}
	p := chunkInfoTo(r)
	allSet(t, p)
	if got := replicaFrom(p); got != r {
		t.Fatalf("round trip: %+v, want %+v", got, r)
	}
	// A secondary tells no lease time, whatever it holds.
	if p := chunkInfoTo(replicaState{Version: 4, LeaseLeft: time.Second}); p.LeaseMs != 0 {
		t.Fatalf("secondary's lease_ms %d", p.LeaseMs)
	}
}

func TestWireRequestsFromPB(t *testing.T) {
	secs, tok := []string{"a:1", "b:2"}, []byte("tok")
	w := writeFrom(&pb.WriteRequest{Handle: 1, Version: 2, Offset: 3, DataId: 4, Length: 5, Secondaries: secs, Token: tok})
	if want := (request{Handle: 1, Version: 2, Offset: 3, Data: 4, Length: 5, Secondaries: secs, Token: tok}); !reflect.DeepEqual(w, want) {
		t.Errorf("write: %+v, want %+v", w, want)
	}
	a := appendFrom(&pb.AppendRequest{Handle: 1, Version: 2, DataId: 4, Length: 5, Secondaries: secs, ChunkSize: 6, Token: tok})
	if want := (request{Handle: 1, Version: 2, Data: 4, Length: 5, ChunkSize: 6, Secondaries: secs, Token: tok}); !reflect.DeepEqual(a, want) {
		t.Errorf("append: %+v, want %+v", a, want)
	}
	r := reserveFrom(&pb.ReserveRequest{Handle: 1, Version: 2, DataId: 4, Length: 5, Secondaries: secs, ChunkSize: 6, Token: tok})
	if !reflect.DeepEqual(r, a) {
		t.Errorf("reserve: %+v, want %+v", r, a)
	}
	s := syncFrom(&pb.SyncRequest{Handle: 1, Version: 2, Secondaries: secs, Token: tok})
	if want := (request{Handle: 1, Version: 2, Secondaries: secs, Token: tok}); !reflect.DeepEqual(s, want) {
		t.Errorf("sync: %+v, want %+v", s, want)
	}
	// The Sync a primary forwards names no further secondaries.
	peer := &wirePeer{}
	if err := (peerLink{peer}).sync(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if p := peer.reqs[0].(*pb.SyncRequest); len(p.Secondaries) != 0 || p.Handle != 1 || p.Version != 2 || string(p.Token) != "tok" {
		t.Errorf("forwarded sync: %v", p)
	}
	if c := cloneFrom(&pb.CloneRequest{Handle: 1, Version: 2, Source: "s:3", Length: 4}); c != (cloneOrder{Handle: 1, Version: 2, Source: "s:3", Length: 4}) {
		t.Errorf("clone: %+v", c)
	}
	if tr := truncationFrom(&pb.TruncateRequest{Handle: 1, Version: 2, Length: 3}); tr != (truncation{Handle: 1, Version: 2, Length: 3}) {
		t.Errorf("truncate: %+v", tr)
	}
}

// A lease term the wire carries out of range, however large, decodes to
// one the server refuses; the largest allowed decodes exactly.
func TestWireLeaseTerm(t *testing.T) {
	top := maxLeaseTerm.Milliseconds()
	for ms, want := range map[int64]time.Duration{
		0: 0, 1: time.Millisecond, top: maxLeaseTerm,
		-1: -1, top + 1: -1, math.MaxInt64: -1, math.MinInt64: -1,
	} {
		if g := leaseFrom(&pb.LeaseRequest{LeaseMs: ms}); g.Term != want {
			t.Errorf("lease_ms %d: term %v, want %v", ms, g.Term, want)
		}
	}
}

func TestWireReportsToPB(t *testing.T) {
	sr := serverReport{ID: "cs1", Addr: "a:1", Cluster: "CID-1", Read: 5, Written: 6,
		Space:  spaceReport{capacity: 100, used: 10, free: 80, disks: []chunkstore.Disk{{ID: "h:1", Total: 100, Free: 80}}},
		Leases: []heldLease{{Handle: 3, Version: 2, Left: 2500 * time.Millisecond}}}
	reps := []chunkstore.Info{{Handle: 3, Version: 2, Length: 7}}
	ctx, m := context.Background(), &wireMaster{}
	if _, err := (masterLink{m}).heartbeat(ctx, heartbeat{serverReport: sr, Load: 4, Sample: reps,
		Extend: []chunkfs.Handle{3}, Corrupt: []chunkfs.Handle{8}, Deleted: []chunkfs.Handle{9}}); err != nil {
		t.Fatal(err)
	}
	b := m.reqs[0].(*pb.HeartbeatRequest)
	allSet(t, b)
	if b.Leases[0].RemainingMs != 2500 || b.Disks[0].Id != "h:1" || b.Disks[0].Capacity != 100 || b.Sample[0].Length != 7 ||
		b.ExtendLeases[0] != 3 || b.Corrupt[0] != 8 || b.Deleted[0] != 9 || b.Load != 4 || b.BytesRead != 5 || b.BytesWritten != 6 {
		t.Errorf("heartbeat: %v", b)
	}
	if _, err := (masterLink{m}).register(ctx, registration{serverReport: sr, Rack: "r1", Chunks: reps}); err != nil {
		t.Fatal(err)
	}
	r := m.reqs[1].(*pb.RegisterRequest)
	allSet(t, r)
	if r.Rack != "r1" || r.Chunks[0].Handle != 3 || r.Free != 80 || r.Used != 10 {
		t.Errorf("registration: %v", r)
	}
	if err := (masterLink{m}).reportCorrupt(ctx, "a:1", 3); err != nil {
		t.Fatal(err)
	}
	if c := m.reqs[2].(*pb.ReportCorruptRequest); c.Reporter != "a:1" || c.Replica != "a:1" || c.Handle != 3 {
		t.Errorf("corrupt report: %v", c)
	}
	peer := &wirePeer{}
	if _, err := (peerLink{peer}).chunkInfo(ctx, 3, []byte("tok")); err != nil {
		t.Fatal(err)
	}
	allSet(t, peer.reqs[0])
}

func TestWireAnswersFromPB(t *testing.T) {
	secret := make([]byte, 32)
	secret[0] = 1
	keys := []*pb.TokenKey{{Id: 1, Secret: secret, ExpiresUnixMs: 5000}, {Id: 2, Secret: secret[:31], ExpiresUnixMs: 5000}}
	reg := registeredFrom(&pb.RegisterResponse{Garbage: []uint64{1}, Stale: []uint64{2}, TokenKeys: keys, ClusterId: "CID-1"})
	if !reflect.DeepEqual(reg.Garbage, []chunkfs.Handle{1, 2}) || reg.Cluster != "CID-1" {
		t.Errorf("registration's garbage and stale, cluster: %v, %q", reg.Garbage, reg.Cluster)
	}
	want := ctoken.Key{ID: 1, Secret: [32]byte{1}, Until: time.UnixMilli(5000).UTC()}
	if len(reg.Keys) != 1 || reg.Keys[0] != want {
		t.Errorf("keys %v; want key 1 alone (key 2's secret is short)", reg.Keys)
	}
	hb := heartbeatAnswerFrom(&pb.HeartbeatResponse{Reregister: true, Garbage: []uint64{4}, Extended: []uint64{5}, LeaseMs: 60000})
	if !hb.Reregister || hb.LeaseTerm != time.Minute || !reflect.DeepEqual(hb.Garbage, []chunkfs.Handle{4}) || !reflect.DeepEqual(hb.Extended, []chunkfs.Handle{5}) {
		t.Errorf("heartbeat answer: %+v", hb)
	}
}

// TestLeaseTermOutOfRange: a Lease whose term is out of range is refused
// as invalid through the real service, and changes nothing: the chunk it
// would have created does not exist.
func TestLeaseTermOutOfRange(t *testing.T) {
	tc := newTestCluster(t, 1)
	ctx := context.Background()
	for i, ms := range []int64{-1, maxLeaseTerm.Milliseconds() + 1, math.MaxInt64} {
		h := uint64(100 + i)
		_, err := tc.cs(0).Lease(ctx, &pb.LeaseRequest{Handle: h, Version: 1, Create: true, LeaseMs: ms})
		if chunkfs.KindOf(err) != chunkfs.KindInvalid || !strings.Contains(err.Error(), "lease duration out of range") {
			t.Errorf("lease_ms %d: %v, want invalid", ms, err)
		}
		if _, err := tc.cs(0).ChunkInfo(ctx, &pb.ChunkInfoRequest{Handle: h}); chunkfs.KindOf(err) != chunkfs.KindNotExist {
			t.Errorf("lease_ms %d: chunk after a refused lease: %v", ms, err)
		}
	}
	resp, err := tc.cs(0).Lease(ctx, &pb.LeaseRequest{Handle: 200, Version: 1, Create: true, LeaseMs: maxLeaseTerm.Milliseconds()})
	if err != nil || resp.Length != 0 {
		t.Fatalf("longest lease: %v, %v", resp, err)
	}
	info, err := tc.cs(0).ChunkInfo(ctx, &pb.ChunkInfoRequest{Handle: 200})
	if err != nil || !info.Primary || info.LeaseMs != maxLeaseTerm.Milliseconds() {
		t.Fatalf("after the longest lease: %v, %v", info, err)
	}
}
