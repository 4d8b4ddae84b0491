package wiretest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
)

// PB is the import path of the generated wire types.
const PB = "github.com/chunkfs/chunkfs/internal/rpc/pb"

// OutsideEdge lists the non-test Go files of dir that import PB although
// edge says they are not on the RPC edge, and reports how many files it
// read (a check that read none checked nothing).
func OutsideEdge(dir string, edge func(file string) bool) (bad []string, read int, err error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, 0, err
	}
	fset := token.NewFileSet()
	for _, path := range names {
		name := filepath.Base(path)
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return nil, read, err
		}
		read++
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == PB && !edge(name) {
				bad = append(bad, name)
			}
		}
	}
	return bad, read, nil
}

// OffTheWire lists, as "file: func", the functions of dir's edge files
// (non-test Go files edge says are on the RPC edge) that do not do the
// edge's work: they name no pb type or function (a handler, a
// conversion, an outgoing call), nor are they named as converting plain
// values (…From, …To) or bounding a request's argument (…Arg). Logic
// belongs in a domain file.
func OffTheWire(dir string, edge func(file string) bool) (bad []string, err error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	for _, path := range names {
		name := filepath.Base(path)
		if strings.HasSuffix(name, "_test.go") || !edge(name) {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && !onTheWire(fd) {
				bad = append(bad, name+": "+fd.Name.Name)
			}
		}
	}
	return bad, nil
}

// onTheWire reports whether fd does the edge's work (OffTheWire).
func onTheWire(fd *ast.FuncDecl) bool {
	for _, suffix := range []string{"From", "To", "Arg"} {
		if strings.HasSuffix(fd.Name.Name, suffix) {
			return true
		}
	}
	wire := false
	ast.Inspect(fd, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := s.X.(*ast.Ident); ok && x.Name == "pb" {
				wire = true
			}
		}
		return !wire
	})
	return wire
}
