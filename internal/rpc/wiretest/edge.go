package wiretest

import (
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
