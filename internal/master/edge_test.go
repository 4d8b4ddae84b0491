package master

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

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
// types; the rest of the master reasons in its own.
func TestPBOnlyAtTheEdge(t *testing.T) {
	bad, read, err := wiretest.OutsideEdge(".", edge)
	if err != nil || read < 10 {
		t.Fatalf("read %d files: %v", read, err)
	}
	for _, name := range bad {
		t.Errorf("%s imports pb: convert to domain values in an _rpc.go file", name)
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
// (cluster report, token keys, HA status), given a value with every field
// set, leave no field of the message empty (a field added to the message
// and forgotten in the conversion fails), and carry the values across.
func TestWireConversionsFillEveryField(t *testing.T) {
	counts := func(n int64) namespace.Counts {
		return namespace.Counts{Files: n, Dirs: n + 1, Chunks: n + 2, Bytes: n + 3}
	}
	rep := clusterReport{stateID: 9, live: counts(10), dead: counts(20), chunkSize: 64 << 20,
		underReplicated: 1, missing: 2, beingCloned: 3, corrupt: 4, repairRate: 5.5, repaired: 6,
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
}
