package master

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/chunkfs/chunkfs"
	"github.com/chunkfs/chunkfs/internal/namespace"
	"github.com/chunkfs/chunkfs/internal/oplog"
	"github.com/chunkfs/chunkfs/internal/rpc/pb"
	"github.com/chunkfs/chunkfs/internal/rpc/wiretest"
)

// edge reports whether a file of the package is on the RPC edge, where
// wire types are converted: its name ends in _rpc.go.
func edge(name string) bool { return strings.HasSuffix(name, "_rpc.go") }

// packageFiles parses the package's non-test files.
func packageFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string]*ast.File)
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	return files
}

// TestPBOnlyAtTheEdge: only the edge files import the generated wire
// types, and they hold only the edge's work (wiretest.OffTheWire); the
// rest of the master reasons in its own.
func TestPBOnlyAtTheEdge(t *testing.T) {
	bad, read, err := wiretest.OutsideEdge(".", edge)
	if err != nil || read < 10 {
		t.Fatalf("read %d files: %v", read, err)
	}
	for _, name := range bad {
		t.Errorf("%s imports pb: convert to domain values in an _rpc.go file", name)
	}
	off, err := wiretest.OffTheWire(".", edge)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range off {
		t.Errorf("%s does not touch the wire: logic belongs in a domain file", f)
	}
}

// TestEveryCallHandled: the service declares every method of the
// generated server interface, so no call falls through to
// UnimplementedMasterServer, and declares them on the edge.
func TestEveryCallHandled(t *testing.T) {
	declared := make(map[string]string) // method of service -> file
	for name, f := range packageFiles(t) {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			if id, ok := fd.Recv.List[0].Type.(*ast.Ident); ok && id.Name == "service" {
				declared[fd.Name.Name] = name
			}
		}
	}
	api := reflect.TypeFor[pb.MasterServer]()
	for i := range api.NumMethod() {
		name := api.Method(i).Name
		if !token.IsExported(name) {
			continue // the embedding guard
		}
		file, ok := declared[name]
		switch {
		case !ok:
			t.Errorf("service does not declare %s: the call would answer Unimplemented", name)
		case !edge(file):
			t.Errorf("service.%s is declared in %s, not on the edge", name, file)
		}
	}
}

// TestWireConversionsFillEveryField: the conversions of the big answers
// (cluster report, token keys, HA status, fsck, chunk locations), given a
// value with every field set, leave no field of the message empty (a field
// added to the message and forgotten in the conversion fails), and carry
// the values across.
func TestWireConversionsFillEveryField(t *testing.T) {
	counts := func(n int64) namespace.Counts {
		return namespace.Counts{Files: n, Dirs: n + 1, Chunks: n + 2, Bytes: n + 3}
	}
	rep := clusterReport{stateID: 9, live: counts(10), dead: counts(20), chunkSize: 64 << 20,
		underReplicated: 1, missing: 2, missingHeldBack: 1, beingCloned: 3, corrupt: 4, repairRate: 5.5, repaired: 6,
		safeMode: true, safeModeHeld: true, safeModeReason: "held",
		balance: balanceStatus{running: true, threshold: 10, inFlight: 2, moved: 3, bytes: 4, spread: 12.5, rate: 1e6},
		servers: []serverStatus{{id: "cs1", addr: "a:1", rack: "r1", capacity: 100, used: 40, free: 60,
			disks: []disk{{id: "d1", capacity: 100, free: 60}}, load: 3, chunks: 7, alive: true,
			sinceBeat: 1500 * time.Millisecond, state: stateLive, drainRemaining: 5}}}
	wire := reportTo(rep)
	if unset := wiretest.Unset(wire.ProtoReflect()); len(unset) > 0 {
		t.Errorf("cluster report fields not filled: %v", unset)
	}
	s := wire.Servers[0]
	if wire.DeadBytes != 23 || wire.Directories != 11 || s.LastHeartbeatMs != 1500 || s.Disks[0].Free != 60 || wire.Balance.MovesInFlight != 2 {
		t.Errorf("cluster report carried wrong values: %v", wire)
	}

	keys := keysTo([]heldKey{{id: 3, secret: [32]byte{1, 2}, expires: time.UnixMilli(1_700_000_000_000)}})
	if unset := wiretest.Unset(keys[0].ProtoReflect()); len(unset) > 0 {
		t.Errorf("token key fields not filled: %v", unset)
	}
	if keys[0].ExpiresUnixMs != 1_700_000_000_000 || keys[0].Secret[1] != 2 || keysTo(nil) != nil {
		t.Errorf("token keys carried wrong values: %v", keys)
	}

	ha := haStatusTo(haStatus{stateID: 5, id: "m1", role: "leader", applied: 5, commit: 6, leaderID: "m1", leaderAddr: "a:1",
		members: []oplog.Member{{ID: "m1", Addr: "a:1", Voter: true}}})
	if unset := wiretest.Unset(ha.ProtoReflect()); len(unset) > 0 {
		t.Errorf("HA status fields not filled: %v", unset)
	}
	if ha.Commit != 6 || ha.Members[0].Addr != "a:1" {
		t.Errorf("HA status carried wrong values: %v", ha)
	}

	fc := fsckCounts{chunks: 5, healthy: 1, underReplicated: 2, missing: 1, heldBack: 1, corrupt: 1}
	fs := fsckTo(fsckReport{stateID: 3, files: []fsckFile{{path: "/f", replication: 3, length: 9, fsckCounts: fc}},
		filesChecked: 1, total: fc, truncated: true, safeMode: true})
	if unset := wiretest.Unset(fs.ProtoReflect()); len(unset) > 0 {
		t.Errorf("fsck fields not filled: %v", unset)
	}
	if fs.Files[0].UnderReplicated != 2 || fs.Missing != 1 {
		t.Errorf("fsck carried wrong values: %v", fs)
	}

	loc := locationTo(location{chunk: namespace.Chunk{Index: 2, Handle: 7, Version: 3}, replicas: []string{"a:1", "b:1"},
		primary: "a:1", leaseLeft: 1500 * time.Millisecond, token: []byte{1}})
	if unset := wiretest.Unset(loc.ProtoReflect()); len(unset) > 0 {
		t.Errorf("location fields not filled: %v", unset)
	}
	if loc.LeaseExpiryMs != 1500 || loc.Handle != 7 || locationTo(location{leaseLeft: time.Second}).LeaseExpiryMs != 0 {
		t.Errorf("location carried wrong values: %v", loc)
	}
}

// TestServerCallsCarryEveryField: a registration and a heartbeat with
// every field set leave no field of the domain values unread (but the
// figure each does not carry: a heartbeat's rack, a registration's load),
// and their answers, with every field set, leave no field of the response
// empty.
func TestServerCallsCarryEveryField(t *testing.T) {
	reg := wiretest.Fill(&pb.RegisterRequest{})
	if zero := wiretest.ZeroAll(struct{ S, R any }{senderFrom(reg), registrationFrom(reg)}); !slices.Equal(zero, []string{".R.figures.load"}) {
		t.Errorf("registration fields not read: %v", zero)
	}
	hb := wiretest.Fill(&pb.HeartbeatRequest{})
	if zero := wiretest.ZeroAll(struct{ S, B any }{senderFrom(hb), beatFrom(hb)}); !slices.Equal(zero, []string{".B.figures.rack"}) {
		t.Errorf("heartbeat fields not read: %v", zero)
	}
	keys := []heldKey{{id: 3, secret: [32]byte{1}, expires: time.UnixMilli(1_700_000_000_000)}}
	r := registerTo(registerAnswer{stateID: 1, cluster: "c", beatEvery: time.Second, keys: keys, garbage: []chunkfs.Handle{2}, stale: []chunkfs.Handle{3}})
	if unset := wiretest.Unset(r.ProtoReflect()); len(unset) > 0 {
		t.Errorf("registration answer fields not filled: %v", unset)
	}
	b := beatTo(beatAnswer{stateID: 1, leaseFor: time.Minute, keys: keys, reregister: true, garbage: []chunkfs.Handle{2}, extended: []chunkfs.Handle{3}})
	if unset := wiretest.Unset(b.ProtoReflect()); len(unset) > 0 {
		t.Errorf("heartbeat answer fields not filled: %v", unset)
	}
	if r.HeartbeatIntervalMs != 1000 || !slices.Equal(r.Stale, []uint64{3}) || b.LeaseMs != 60000 || !slices.Equal(b.Extended, []uint64{3}) {
		t.Errorf("answers carried wrong values: %v, %v", r, b)
	}
}

// TestEveryCallTakesAnyRequest calls every method of the generated
// interface on the service with a request whose fields are all empty, one
// whose fields are all set (wiretest.Fill), and that one again from the
// superuser with its paths absolute: each answers (a refusal or a result),
// none panics or falls through to Unimplemented, and the master serves on.
func TestEveryCallTakesAnyRequest(t *testing.T) {
	tm := startMaster(t, "", nil)
	srv := reflect.ValueOf(tm.m.Server())
	api := reflect.TypeFor[pb.MasterServer]()
	for i := range api.NumMethod() {
		name := api.Method(i).Name
		if !token.IsExported(name) {
			continue
		}
		call := srv.MethodByName(name)
		empty := reflect.New(call.Type().In(1).Elem())
		filled := reflect.ValueOf(wiretest.Fill(reflect.New(call.Type().In(1).Elem()).Interface().(proto.Message)))
		rooted := reflect.ValueOf(asRoot(wiretest.Fill(reflect.New(call.Type().In(1).Elem()).Interface().(proto.Message))))
		for _, req := range []reflect.Value{empty, filled, rooted} {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s(%v) panics: %v", name, req, r)
					}
				}()
				ctx, cancel := context.WithTimeout(bg, 10*time.Second)
				defer cancel()
				err, _ := call.Call([]reflect.Value{reflect.ValueOf(ctx), req})[1].Interface().(error)
				if c := status.Code(err); c == codes.Unimplemented || errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s(%v): %v", name, req, err)
				}
			}()
		}
	}
	if _, err := tm.c.Stat(bg, &pb.StatRequest{Caller: root, Path: "/"}); err != nil {
		t.Fatalf("the master stopped serving: %v", err)
	}
}

// asRoot makes m's caller the superuser and its paths absolute, so that a
// call gets past the first checks.
func asRoot(m proto.Message) proto.Message {
	r := m.ProtoReflect()
	fields := r.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.Name() == "caller":
			r.Set(fd, protoreflect.ValueOfMessage((&pb.Caller{Uid: 0, Gids: []uint32{0}}).ProtoReflect()))
		case fd.Kind() == protoreflect.StringKind && !fd.IsList() && slices.Contains([]string{"path", "src", "dst", "to"}, string(fd.Name())):
			r.Set(fd, protoreflect.ValueOfString("/"+string(fd.Name())))
		}
	}
	return m
}
