package master

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/chunkfs/chunkfs/internal/rpc/pb"
)

const pbPath = "github.com/chunkfs/chunkfs/internal/rpc/pb"

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
	files := packageFiles(t)
	if len(files) < 10 {
		t.Fatalf("parsed %d files: not the package directory?", len(files))
	}
	for name, f := range files {
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == pbPath && !edge(name) {
				t.Errorf("%s imports %s: convert to domain values in an _rpc.go file", name, p)
			}
		}
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
